"""Encoded sentence pairs as flat arrays, and the filter that drops unusable pairs.

`ParallelDataset` holds the token ids of N pairs in four flat arrays (tokens and offsets per
side), so a WMT-size corpus costs a few bytes per token and slices without copies.
`encode_corpus` encodes raw pairs with the run's SentencePiece model (SentencePiece batch
encoding on all cores, in chunks); `filter_pairs` drops empty pairs, pairs with a side longer
than `max_len` tokens and, optionally, pairs whose length ratio exceeds `max_len_ratio`, and
counts every drop by reason (`DropReport`). `transformer.data.prepare.prepare_data` runs these
steps in order (section 5.1 of the paper).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from transformer.data.corpus import ParallelText
from transformer.data.tokenizer import Tokenizer

ENCODE_CHUNK = 100_000


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
