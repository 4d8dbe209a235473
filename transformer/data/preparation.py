"""The steps of one `prepare_data` call: vocabulary, encoding and filtering of each split.

`Preparation` holds what the steps share (the config, the run and cache directories, the log,
the stage timer, and the training corpus's word counts while the model was just trained on
them); `transformer.data.prepare.prepare_data` runs them in order. Each split's token ids and
its kept rows are cache entries (`transformer.data.token_cache`), so that a second run, and
every other process of a torchrun job (`build=False`), opens them instead of doing the work.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from pathlib import Path

import numpy as np

from transformer.data.bpe_dropout import SAMPLES_PER_WORD, BPEDropoutDataset, write_segmentations
from transformer.data.config import DataConfig
from transformer.data.corpus import corpus_size, iter_parallel
from transformer.data.dataset import DropReport, ParallelDataset, filter_pairs, length_dtype
from transformer.data.encoding import SIDES, collect_words, encode_chunks, encode_collected
from transformer.data.stages import Stages
from transformer.data.token_cache import ArrayWriter, cache_path, load_arrays, save_arrays
from transformer.data.tokenizer import UNK_ID, Tokenizer
from transformer.data.vocabulary import model_paths, train_tokenizer

CHUNK_PAIRS = 100_000


class DataNotPrepared(FileNotFoundError):
    """`prepare_data(build=False)` found no SentencePiece model or cache entry (yet)."""


def _entry(path: Path, log) -> dict[str, np.ndarray] | None:
    """The arrays of a cache entry, or None when there is none or it is unreadable (then it
    is removed, to be written again)."""
    try:
        return load_arrays(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:  # a damaged meta.json too
        log(f"cached token ids {path} unreadable ({error!r}); encoding again")
        shutil.rmtree(path, ignore_errors=True)
        return None


def _filter_key(config: DataConfig) -> str:
    """Name of the kept-rows entry of the filter settings."""
    key = f"{config.max_len}|{config.max_len_ratio!r}".encode()
    return "kept-" + hashlib.blake2b(key, digest_size=8).hexdigest()


class Preparation:
    """One `prepare_data` call: its config, directories, log and stages.

    Args:
        config: The `data:` section.
        output_dir: The run directory.
        log: Receives one-line messages.
        build: False only opens what is prepared (`DataNotPrepared` otherwise).
    """

    def __init__(self, config: DataConfig, output_dir: Path, log, build: bool) -> None:
        self.config, self.output_dir, self.log, self.build = config, output_dir, log, build
        self.cache_dir = config.cache_directory(output_dir)
        if build:
            self.make_cache_dir()
        self.stages = Stages(log)
        self.collected = None  # the training corpus's words, when the model was just trained
        self.scratch: Path | None = None

    def make_cache_dir(self) -> None:
        """Make the cache directory, or say in one line why it cannot be made.

        Raises:
            ValueError: it is a file, a parent is a file, or no permission; naming
                data.cache_dir when the config set it.
        """
        name = self.cache_name()
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            if self.cache_dir.is_file():
                reason = "it is a file"
            elif self.cache_dir.is_symlink():  # and its target is missing
                reason = f"it is a link to {os.readlink(self.cache_dir)}, which does not exist"
            elif error.errno == errno.ENOTDIR:
                reason = "a folder above it is a file"
            else:
                reason = error.strerror or str(error)
            raise ValueError(f"{name} ({self.cache_dir}) cannot be made: {reason}") from error

    def unwritable(self, error: OSError) -> ValueError | None:
        """`error` as one line naming data.cache_dir when it refused a write in the cache.

        A cache folder that exists but cannot be written (read-only, or immutable, which even
        root cannot write) is found at the first write, not up front: a complete cache is read
        without writing, and may be read-only.

        Returns:
            The `ValueError` to raise instead, or None for any other error.
        """
        refused = error.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
        if not refused or not error.filename:
            return None
        if self.cache_dir.resolve() not in Path(error.filename).resolve().parents:
            return None
        return ValueError(
            f"{self.cache_name()} ({self.cache_dir}) cannot be written: {error.strerror}"
        )

    def cache_name(self) -> str:
        """How a message names the cache folder: by its key when the config set it."""
        return "data.cache_dir" if self.config.cache_dir else "the cache directory"

    def chunks(self, spec: str):
        return iter_parallel(spec, self.config.source_lang, self.config.target_lang, CHUNK_PAIRS)

    def train_vocabulary(self, settings: dict) -> Tokenizer:
        """Count the training corpus's words (BPE) and train the model(s) on them."""
        config = self.config
        pairs = corpus_size(config.train, config.source_lang, config.target_lang)
        if config.spm_model_type != "bpe":
            with self.stages.stage("vocabulary: SentencePiece on sentences"):
                side = lambda i: (s for chunk in self.chunks(config.train) for s in chunk[i])  # noqa: E731
                tokenizer = train_tokenizer(
                    config, self.output_dir, settings, config.train, None, side
                )
            return self.trained(tokenizer)
        sentences = pairs * (2 if config.shared_vocab else 1)
        rate = min(1.0, config.spm_input_sentence_size / max(1, sentences))
        # The word ids are scratch of this run (dropped once encoded): in the run directory,
        # so that a complete cache shared by several runs may be read-only.
        writer = ArrayWriter(self.output_dir / f".words.tmp-{os.getpid()}-scratch")
        try:
            with self.stages.stage("train: read and count words", pairs) as advance:
                self.collected = collect_words(self.chunks(config.train), rate, 1, writer, advance)
            self.scratch = writer.commit()
        except BaseException:
            writer.abort()
            raise
        words = sum(len(table) for table in self.collected.tables)
        with self.stages.stage(f"vocabulary: SentencePiece on {words:,} distinct words"):
            tokenizer = train_tokenizer(
                config, self.output_dir, settings, config.train, self.collected
            )
        return self.trained(tokenizer)

    def trained(self, tokenizer: Tokenizer) -> Tokenizer:
        paths = model_paths(self.output_dir, self.config.shared_vocab)
        self.log(
            f"trained SentencePiece {self.config.spm_model_type} model(s) with "
            f"{self.config.vocab_size} pieces -> {', '.join(map(str, paths))}"
        )
        return tokenizer

    def split(self, split: str, spec: str, fingerprint: str, tokenizer: Tokenizer, text=None):
        """The filtered, cached pairs of one split (`text`: the split already read)."""
        models = (tokenizer.src_model_bytes, tokenizer.tgt_model_bytes)
        path = cache_path(self.cache_dir, split, fingerprint, models)
        arrays = _entry(path, self.log)
        if arrays is None:
            if not self.build:
                raise DataNotPrepared(f"{split} data not prepared yet: no {path}")
            self.encode(split, spec, path, tokenizer, text)
            arrays = load_arrays(path)
        else:
            self.log(f"{split}: loaded cached token ids {path}")
        tokens = [arrays[f"{side}_{kind}"] for side in SIDES for kind in ("tokens", "offsets")]
        kept_path = path / _filter_key(self.config)
        kept = _entry(kept_path, self.log)
        if kept is None:
            if not self.build:
                raise DataNotPrepared(f"{split} data not filtered yet: no {kept_path}")
            with self.stages.stage(f"{split}: filter"):
                rows = np.arange(len(arrays["src_offsets"]) - 1, dtype=np.int64)
                corpus = ParallelDataset(*tokens, rows)  # every pair (its lengths computed)
                data, report = filter_pairs(corpus, self.config.max_len, self.config.max_len_ratio)
                lengths = length_dtype(
                    int(max(data.src_lengths.max(initial=0), data.tgt_lengths.max(initial=0)))
                )
                counts = np.array([report.total, report.empty, report.too_long, report.bad_ratio])
                save_arrays(
                    kept_path,
                    {
                        "line_numbers": data.line_numbers,
                        "src_lengths": data.src_lengths.astype(lengths),
                        "tgt_lengths": data.tgt_lengths.astype(lengths),
                        "report": counts.astype(np.int64),
                    },
                )
            kept = load_arrays(kept_path)
        report = DropReport(
            *kept["report"].tolist(), self.config.max_len, self.config.max_len_ratio
        )
        self.log(f"{split}: {report}")
        if self.build:  # one process says it (a pass over the token ids: under a second for WMT)
            self.log_unknown(split, tokens[0], tokens[2])
        if len(kept["line_numbers"]) == 0:
            raise ValueError(
                f"{split} data {spec!r} is empty after filtering ({report}); check the files, "
                "or raise data.max_len / data.max_len_ratio"
            )
        data = ParallelDataset(
            *tokens, kept["line_numbers"], kept["src_lengths"], kept["tgt_lengths"]
        )
        return data, report

    def log_unknown(self, split: str, src_tokens: np.ndarray, tgt_tokens: np.ndarray) -> None:
        """Say how many pieces of a split are unk: characters outside the SentencePiece
        alphabet, which the model can neither read nor write (none: nothing is said)."""
        unknown = [int(np.count_nonzero(tokens == UNK_ID)) for tokens in (src_tokens, tgt_tokens)]
        if any(unknown):
            self.log(
                f"{split}: {unknown[0]:,} source and {unknown[1]:,} target pieces are unk "
                "(characters outside the SentencePiece alphabet; data.spm_character_coverage "
                f"{self.config.spm_character_coverage:g} leaves out the rarest)"
            )

    def bpe_dropout(self, data: ParallelDataset, fingerprint: str, tokenizer: Tokenizer):
        """The training pairs with BPE-dropout's segmentations (cached beside their ids)."""
        models = (tokenizer.src_model_bytes, tokenizer.tgt_model_bytes)
        key = f"{self.config.bpe_dropout!r}|{SAMPLES_PER_WORD}".encode()
        path = cache_path(self.cache_dir, "train", fingerprint, models)
        path = path / ("bpe-dropout-" + hashlib.blake2b(key, digest_size=8).hexdigest())
        arrays = _entry(path, self.log)
        if arrays is None:
            if not self.build:
                raise DataNotPrepared(f"BPE-dropout segmentations not written yet: no {path}")
            writer, total = ArrayWriter(path), len(data.src_offsets) - 1
            try:
                with self.stages.stage("train: BPE-dropout segmentations", total) as advance:
                    chunks = self.chunks(self.config.train)
                    dtype = data.src_tokens.dtype
                    write_segmentations(
                        chunks, models, self.config.bpe_dropout, dtype, writer, advance
                    )
                writer.commit()
            except BaseException:
                writer.abort()
                raise
            arrays = load_arrays(path)
        else:
            self.log(f"train: loaded cached BPE-dropout samples {path}")
        return BPEDropoutDataset(data, arrays, self.config.max_len, self.config.max_len_ratio)

    def encode(self, split: str, spec: str, path: Path, tokenizer: Tokenizer, text) -> None:
        """Encode a split into the cache entry `path`."""
        config = self.config
        if text is not None:
            total, chunks = len(text), [(text.src, text.tgt)]
        else:
            total, chunks = corpus_size(spec, config.source_lang, config.target_lang), None
        writer = ArrayWriter(path)
        try:
            with self.stages.stage(f"{split}: encode", total) as advance:
                if split == "train" and self.collected is not None:
                    encode_collected(self.collected, self.scratch, tokenizer, writer, advance)
                else:
                    encode_chunks(chunks or self.chunks(spec), tokenizer, writer, advance)
            writer.commit()
        except BaseException:
            writer.abort()
            raise
        finally:
            self.drop_scratch()
        self.log(f"{split}: encoded {total} pairs -> {path}")

    def drop_scratch(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = self.collected = None
