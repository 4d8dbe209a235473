"""From raw parallel text to filtered, cached token ids: `prepare_data`.

Example:
    >>> from transformer.data.config import DataConfig
    >>> from transformer.data.prepare import prepare_data
    >>> from transformer.data.batching import BatchIterator
    >>> config = DataConfig(train="multi30k/train", valid="multi30k/val", vocab_size=8000)
    >>> prepared = prepare_data(config, "checkpoints/m30k")  # trains checkpoints/m30k/spm.model
    train: dropped 0 of 29000 pairs: 0 empty, 0 longer than 256 tokens
    ...
    >>> it = BatchIterator(prepared.train, max_tokens=4096, seed=1)
    >>> batch = next(iter(it.epoch(1)))
    >>> batch.src.shape, batch.tgt_in.shape  # (B, S), (B, T)

Steps (section 5.1 of the paper, with SentencePiece in place of the authors' BPE tool):
1. read the corpora (`transformer.data.corpus`), either direction of the same files;
2. train one joint SentencePiece model on both sides of the training data, or reuse the one
   already in `output_dir` (`transformer.data.vocabulary`);
3. encode every sentence once (`transformer.data.dataset.encode_corpus`) and cache the ids as
   flat numpy arrays with offsets, keyed by a hash of the input files and the model bytes
   (`transformer.data.token_cache`);
4. drop empty/whitespace pairs (from both sides), pairs with a side longer than `max_len`
   tokens, and optionally pairs whose length ratio exceeds `max_len_ratio`; every drop is
   counted and reported (`transformer.data.dataset.filter_pairs`).
"""

from __future__ import annotations

import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from transformer.data.config import DataConfig
from transformer.data.corpus import ParallelText, corpus_fingerprint, read_parallel
from transformer.data.dataset import DropReport, ParallelDataset, encode_corpus, filter_pairs
from transformer.data.token_cache import cache_path, load_arrays, save_arrays
from transformer.data.tokenizer import Tokenizer
from transformer.data.vocabulary import load_or_train_tokenizer, model_paths

# The arrays of an encoded corpus in its cache file, besides "blank" (empty-side pairs).
_CACHED = ("src_tokens", "src_offsets", "tgt_tokens", "tgt_offsets")


class DataNotPrepared(FileNotFoundError):
    """`prepare_data(build=False)` found no SentencePiece model or cache file (yet)."""


@dataclass
class PreparedData:
    """What `prepare_data` returns.

    Attributes:
        tokenizer: The SentencePiece tokenizer (saved in `output_dir`).
        train: Filtered training pairs, or None when `prepare_data(train=False)`.
        valid: Filtered validation pairs, or None when `config.valid` is empty.
        valid_src_text, valid_ref_text: All raw validation sentences (unfiltered, for BLEU).
        train_report, valid_report: Drop counts (None where there is no such split).
    """

    tokenizer: Tokenizer
    train: ParallelDataset | None
    valid: ParallelDataset | None
    valid_src_text: list[str]
    valid_ref_text: list[str]
    train_report: DropReport | None = None
    valid_report: DropReport | None = None


def _encoded(
    split: str,
    text_or_spec,
    config: DataConfig,
    tokenizer: Tokenizer,
    cache_dir: Path,
    log,
    build: bool = True,
):
    """Encoded (unfiltered) split, from the cache when its key matches (only from the cache,
    or `DataNotPrepared`, without `build`)."""
    if isinstance(text_or_spec, ParallelText):
        text, fingerprint = text_or_spec, text_or_spec.fingerprint
    else:
        text, fingerprint = (
            None,
            corpus_fingerprint(text_or_spec, config.source_lang, config.target_lang),
        )
    models = (tokenizer.src_model_bytes, tokenizer.tgt_model_bytes)
    path = cache_path(cache_dir, split, fingerprint, models)
    if path.is_file():
        try:
            arrays = load_arrays(path)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
            # A file cut short (a crash before atomic writes, a full disk): encode again.
            log(f"{split}: cached token ids {path} unreadable ({error}); encoding again")
        else:
            log(f"{split}: loaded cached token ids {path}")
            lines = np.arange(len(arrays["blank"]), dtype=np.int64)
            return ParallelDataset(*(arrays[name] for name in _CACHED), lines), arrays["blank"]
    if not build:
        raise DataNotPrepared(f"{split} data not prepared yet: no {path}")
    if text is None:
        text = read_parallel(text_or_spec, config.source_lang, config.target_lang)
    start = time.perf_counter()
    data, blank = encode_corpus(text, tokenizer)
    save_arrays(path, {**{name: getattr(data, name) for name in _CACHED}, "blank": blank})
    log(f"{split}: encoded {len(text)} pairs in {time.perf_counter() - start:.1f} s -> {path}")
    return data, blank


def _filtered(split: str, spec: str, data, blank, config: DataConfig, log):
    kept, report = filter_pairs(data, blank, config.max_len, config.max_len_ratio)
    log(f"{split}: {report}")
    if len(kept) == 0:
        raise ValueError(
            f"{split} data {spec!r} is empty after filtering ({report}); check the files, "
            "or raise data.max_len / data.max_len_ratio"
        )
    return kept, report


def prepare_data(
    config: DataConfig,
    output_dir: str | Path,
    train: bool = True,
    log: Callable[[str], None] | None = print,
    build: bool = True,
) -> PreparedData:
    """Tokenizer plus filtered, encoded training and validation data (see module doc).

    Args:
        config: The `data:` section.
        output_dir: Run directory; holds the SentencePiece model(s) and, unless
            `config.cache_dir` is set, the `cache/` of encoded corpora.
        train: Also prepare the training split (and train the SentencePiece model when it is
            not in `output_dir`); False only loads the model and the validation split.
        log: Receives one-line progress and drop reports; None silences them.
        build: False uses only what is already in `output_dir` (the SentencePiece model and
            the cached token ids) and raises `DataNotPrepared` when something is missing:
            how the other processes of a torchrun job load what rank 0 prepared.

    Returns:
        `PreparedData` with `tokenizer`, `train`, `valid`, `valid_src_text`, `valid_ref_text`.

    Raises:
        FileNotFoundError: missing corpus file, or no model in `output_dir` with train=False.
        DataNotPrepared: with build=False, a model or cache file that is not there (yet).
        ValueError: unreadable/misaligned corpus, a model whose size differs from the
            config, or a split that is empty after filtering.
    """
    log = log or (lambda message: None)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    cache_dir = Path(config.cache_dir) if config.cache_dir else output_dir / "cache"
    train_text = None
    if not all(p.is_file() for p in model_paths(output_dir, config.shared_vocab)):
        if not build:
            raise DataNotPrepared(f"no SentencePiece model in {output_dir} yet")
        if train:
            train_text = read_parallel(config.train, config.source_lang, config.target_lang)
    tokenizer = load_or_train_tokenizer(config, output_dir, train_text, log)
    result = PreparedData(tokenizer, None, None, [], [])
    if train:
        source = train_text if train_text is not None else config.train
        data, blank = _encoded("train", source, config, tokenizer, cache_dir, log, build)
        result.train, result.train_report = _filtered(
            "train", config.train, data, blank, config, log
        )
    if config.valid:
        text = read_parallel(config.valid, config.source_lang, config.target_lang)
        result.valid_src_text, result.valid_ref_text = text.src, text.tgt
        data, blank = _encoded("valid", text, config, tokenizer, cache_dir, log, build)
        result.valid, result.valid_report = _filtered(
            "valid", config.valid, data, blank, config, log
        )
    return result
