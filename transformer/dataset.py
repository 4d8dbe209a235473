"""From raw parallel text to filtered, cached token ids: `prepare_data`.

Example:
    >>> from transformer.config import DataConfig
    >>> from transformer.dataset import prepare_data
    >>> from transformer.batching import BatchIterator
    >>> config = DataConfig(train="multi30k/train", valid="multi30k/val", vocab_size=8000)
    >>> prepared = prepare_data(config, "checkpoints/m30k")  # trains checkpoints/m30k/spm.model
    train: dropped 0 of 29000 pairs: 0 empty, 0 longer than 256 tokens
    ...
    >>> it = BatchIterator(prepared.train, max_tokens=4096, seed=1)
    >>> batch = next(iter(it.epoch(1)))
    >>> batch.src.shape, batch.tgt_in.shape  # (B, S), (B, T)

Steps (section 5.1 of the paper, with SentencePiece in place of the authors' BPE tool):
1. read the corpora (`transformer.corpus`), either direction of the same files;
2. train one joint SentencePiece model on both sides of the training data, or reuse the one
   already in `output_dir` (`transformer.run_tokenizer`);
3. encode every sentence once (SentencePiece batch encoding on all cores) and cache the ids as
   flat numpy arrays with offsets, keyed by a hash of the input files and the model bytes
   (`transformer.token_cache`);
4. drop empty/whitespace pairs (from both sides), pairs with a side longer than `max_len`
   tokens, and optionally pairs whose length ratio exceeds `max_len_ratio`; every drop is
   counted and reported.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from transformer.config import DataConfig
from transformer.corpus import ParallelText, corpus_fingerprint, read_parallel
from transformer.run_tokenizer import load_or_train_tokenizer, model_paths
from transformer.token_cache import cache_path, load_arrays, save_arrays
from transformer.tokenizer import Tokenizer

ENCODE_CHUNK = 100_000
# The arrays of an encoded corpus in its cache file, besides "blank" (empty-side pairs).
_CACHED = ("src_tokens", "src_offsets", "tgt_tokens", "tgt_offsets")


@dataclass
class ParallelDataset:
    """Token ids of N sentence pairs, stored flat: pair i's source is
    `src_tokens[src_offsets[i]:src_offsets[i + 1]]` (no bos/eos; likewise the target).

    Attributes:
        src_tokens, tgt_tokens: Flat id arrays (uint16 when the vocabulary fits, else int32).
        src_offsets, tgt_offsets: int64 arrays of shape (N + 1,).
        line_numbers: int64 (N,): 0-based line of each pair in the original corpus.
    """

    src_tokens: np.ndarray
    src_offsets: np.ndarray
    tgt_tokens: np.ndarray
    tgt_offsets: np.ndarray
    line_numbers: np.ndarray

    def __len__(self) -> int:
        return len(self.line_numbers)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(source ids, target ids) of pair `index`."""
        s0, s1 = self.src_offsets[index], self.src_offsets[index + 1]
        t0, t1 = self.tgt_offsets[index], self.tgt_offsets[index + 1]
        return self.src_tokens[s0:s1], self.tgt_tokens[t0:t1]

    @property
    def src_lengths(self) -> np.ndarray:
        """Source lengths in tokens, shape (N,)."""
        return np.diff(self.src_offsets)

    @property
    def tgt_lengths(self) -> np.ndarray:
        """Target lengths in tokens (without bos/eos), shape (N,)."""
        return np.diff(self.tgt_offsets)

    def select(self, keep: np.ndarray) -> ParallelDataset:
        """A new dataset with the pairs where the boolean mask `keep` is true, in order."""
        src_tokens, src_offsets = _gather(self.src_tokens, self.src_offsets, keep)
        tgt_tokens, tgt_offsets = _gather(self.tgt_tokens, self.tgt_offsets, keep)
        return ParallelDataset(
            src_tokens, src_offsets, tgt_tokens, tgt_offsets, self.line_numbers[keep]
        )


def _gather(tokens: np.ndarray, offsets: np.ndarray, keep: np.ndarray):
    """Flat tokens/offsets of the kept rows only."""
    lengths = np.diff(offsets)
    token_keep = np.repeat(keep, lengths)
    new_offsets = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
    np.cumsum(lengths[keep], out=new_offsets[1:])
    return tokens[token_keep], new_offsets


@dataclass
class DropReport:
    """How many pairs of a corpus were dropped, and why (each pair counted once, first reason)."""

    total: int
    empty: int
    too_long: int
    bad_ratio: int
    max_len: int
    max_len_ratio: float | None

    @property
    def dropped(self) -> int:
        return self.empty + self.too_long + self.bad_ratio

    def __str__(self) -> str:
        text = (
            f"dropped {self.dropped} of {self.total} pairs: {self.empty} empty, "
            f"{self.too_long} longer than {self.max_len} tokens"
        )
        if self.max_len_ratio is not None:
            text += f", {self.bad_ratio} with length ratio above {self.max_len_ratio:g}"
        return text


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


def _pack(ids: list[list[int]], dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Nested id lists -> (flat tokens, lengths)."""
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    tokens = np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=int(lengths.sum()))
    return tokens, lengths


def _encode_side(encode_batch: Callable, texts: list[str], dtype: type):
    """Encode texts in chunks (bounded memory for WMT-size corpora) -> (tokens, offsets)."""
    parts = [
        _pack(encode_batch(texts[i : i + ENCODE_CHUNK]), dtype)
        for i in range(0, len(texts), ENCODE_CHUNK)
    ]
    tokens = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=dtype)
    lengths = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return tokens, offsets


def encode_corpus(text: ParallelText, tokenizer: Tokenizer) -> tuple[ParallelDataset, np.ndarray]:
    """Encode every pair (unfiltered).

    Returns:
        The dataset and a boolean (N,) array marking pairs where either side is empty or
        whitespace only.
    """
    dtype = (
        np.uint16 if max(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size) <= 65535 else np.int32
    )
    src_tokens, src_offsets = _encode_side(tokenizer.encode_batch, text.src, dtype)
    tgt_tokens, tgt_offsets = _encode_side(tokenizer.encode_target_batch, text.tgt, dtype)
    blank = np.fromiter(
        (not s.strip() or not t.strip() for s, t in zip(text.src, text.tgt, strict=True)),
        dtype=bool,
        count=len(text),
    )
    lines = np.arange(len(text), dtype=np.int64)
    return ParallelDataset(src_tokens, src_offsets, tgt_tokens, tgt_offsets, lines), blank


def filter_pairs(
    data: ParallelDataset, blank: np.ndarray, max_len: int, max_len_ratio: float | None
) -> tuple[ParallelDataset, DropReport]:
    """Drop empty pairs, pairs with a side longer than `max_len` tokens (bos/eos not counted)
    and, if set, pairs with max(len) / min(len) above `max_len_ratio`."""
    src_len, tgt_len = data.src_lengths, data.tgt_lengths
    empty = blank | (src_len == 0) | (tgt_len == 0)
    too_long = ~empty & ((src_len > max_len) | (tgt_len > max_len))
    bad_ratio = np.zeros_like(empty)
    if max_len_ratio is not None:
        ratio = np.maximum(src_len, tgt_len) / np.maximum(np.minimum(src_len, tgt_len), 1)
        bad_ratio = ~empty & ~too_long & (ratio > max_len_ratio)
    keep = ~(empty | too_long | bad_ratio)
    report = DropReport(
        len(data),
        int(empty.sum()),
        int(too_long.sum()),
        int(bad_ratio.sum()),
        max_len,
        max_len_ratio,
    )
    return data.select(keep), report


def _encoded(
    split: str, text_or_spec, config: DataConfig, tokenizer: Tokenizer, cache_dir: Path, log
):
    """Encoded (unfiltered) split, from the cache when its key matches."""
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
        log(f"{split}: loaded cached token ids {path}")
        arrays = load_arrays(path)
        lines = np.arange(len(arrays["blank"]), dtype=np.int64)
        return ParallelDataset(*(arrays[name] for name in _CACHED), lines), arrays["blank"]
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
) -> PreparedData:
    """Tokenizer plus filtered, encoded training and validation data (see module doc).

    Args:
        config: The `data:` section.
        output_dir: Run directory; holds the SentencePiece model(s) and, unless
            `config.cache_dir` is set, the `cache/` of encoded corpora.
        train: Also prepare the training split (and train the SentencePiece model when it is
            not in `output_dir`); False only loads the model and the validation split.
        log: Receives one-line progress and drop reports; None silences them.

    Returns:
        `PreparedData` with `tokenizer`, `train`, `valid`, `valid_src_text`, `valid_ref_text`.

    Raises:
        FileNotFoundError: missing corpus file, or no model in `output_dir` with train=False.
        ValueError: unreadable/misaligned corpus, a model whose size differs from the
            config, or a split that is empty after filtering.
    """
    log = log or (lambda message: None)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    cache_dir = Path(config.cache_dir) if config.cache_dir else output_dir / "cache"
    train_text = None
    if train and not all(p.is_file() for p in model_paths(output_dir, config.shared_vocab)):
        train_text = read_parallel(config.train, config.source_lang, config.target_lang)
    tokenizer = load_or_train_tokenizer(config, output_dir, train_text, log)
    result = PreparedData(tokenizer, None, None, [], [])
    if train:
        source = train_text if train_text is not None else config.train
        data, blank = _encoded("train", source, config, tokenizer, cache_dir, log)
        result.train, result.train_report = _filtered(
            "train", config.train, data, blank, config, log
        )
    if config.valid:
        text = read_parallel(config.valid, config.source_lang, config.target_lang)
        result.valid_src_text, result.valid_ref_text = text.src, text.tgt
        data, blank = _encoded("valid", text, config, tokenizer, cache_dir, log)
        result.valid, result.valid_report = _filtered(
            "valid", config.valid, data, blank, config, log
        )
    return result
