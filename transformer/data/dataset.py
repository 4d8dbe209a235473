"""Encoded sentence pairs as flat arrays, and the filter that drops unusable pairs.

`ParallelDataset` holds the token ids of N pairs as rows of a corpus stored in four flat
arrays (tokens and offsets per side), so a WMT-size corpus costs a few bytes per token, and
filtering or slicing never copies tokens (`transformer.data.encoding` fills the arrays).
`filter_pairs` drops empty pairs, pairs with a side longer than `max_len` tokens and,
optionally, pairs whose length ratio exceeds `max_len_ratio`, and counts every drop by reason
(`DropReport`). `transformer.data.prepare.prepare_data` runs these steps in order (section 5.1
of the paper).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class ParallelDataset:
    """Token ids of N sentence pairs: rows `line_numbers` of a corpus stored flat.

    The corpus's M pairs are four flat arrays (tokens and offsets per side, no bos/eos): pair
    j's source is `src_tokens[src_offsets[j]:src_offsets[j + 1]]`. Pair i of the dataset is
    corpus pair `line_numbers[i]`, so filtering keeps the token arrays as they are (they may be
    read-only memory maps shared by every process) and selects rows.

    Args:
        src_tokens, tgt_tokens: Flat id arrays of the corpus (uint16 when the vocabulary
            fits, else int32).
        src_offsets, tgt_offsets: int64 arrays of shape (M + 1,).
        line_numbers: int64 (N,): the corpus rows in this dataset, the 0-based line of each
            pair in the original corpus.
        src_lengths, tgt_lengths: Token counts of the N pairs (computed from the offsets
            when not given; the cache stores them so that every process can share them).
    """

    def __init__(
        self,
        src_tokens: np.ndarray,
        src_offsets: np.ndarray,
        tgt_tokens: np.ndarray,
        tgt_offsets: np.ndarray,
        line_numbers: np.ndarray,
        src_lengths: np.ndarray | None = None,
        tgt_lengths: np.ndarray | None = None,
    ) -> None:
        self.src_tokens, self.src_offsets = src_tokens, src_offsets
        self.tgt_tokens, self.tgt_offsets = tgt_tokens, tgt_offsets
        self.line_numbers = line_numbers
        self.src_lengths = (
            _lengths(src_offsets, line_numbers) if src_lengths is None else src_lengths
        )
        self.tgt_lengths = (
            _lengths(tgt_offsets, line_numbers) if tgt_lengths is None else tgt_lengths
        )

    def __len__(self) -> int:
        return len(self.line_numbers)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(source ids, target ids) of pair `index`."""
        row = self.line_numbers[index]
        s0, s1 = self.src_offsets[row], self.src_offsets[row + 1]
        t0, t1 = self.tgt_offsets[row], self.tgt_offsets[row + 1]
        return self.src_tokens[s0:s1], self.tgt_tokens[t0:t1]

    # The identity of the samples a subclass segments each epoch from (None: one segmentation).
    segmentation: str | None = None

    def for_epoch(self, epoch: int, seed: int) -> ParallelDataset:
        """The pairs of training epoch `epoch` of a run seeded with `seed`: this dataset, the
        same every epoch (a subclass samples a segmentation per epoch, data/bpe_dropout.py)."""
        return self

    def select(self, keep: np.ndarray) -> ParallelDataset:
        """A new dataset with the pairs where the boolean mask `keep` is true, in order (the
        token arrays are shared, not copied)."""
        return ParallelDataset(
            self.src_tokens,
            self.src_offsets,
            self.tgt_tokens,
            self.tgt_offsets,
            self.line_numbers[keep],
            self.src_lengths[keep],
            self.tgt_lengths[keep],
        )


def _lengths(offsets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Token counts of corpus rows `rows`, in the smallest unsigned dtype that holds them."""
    lengths = offsets[rows + 1] - offsets[rows]
    return lengths.astype(length_dtype(int(lengths.max()) if len(lengths) else 0))


def length_dtype(longest: int) -> type:
    """uint16 for lengths up to 65535 tokens, else int32 (half the memory for real corpora)."""
    return np.uint16 if longest <= np.iinfo(np.uint16).max else np.int32


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


def filter_pairs(
    data: ParallelDataset, max_len: int, max_len_ratio: float | None
) -> tuple[ParallelDataset, DropReport]:
    """Drop empty pairs (a side without tokens: empty, whitespace only), pairs with a side
    longer than `max_len` tokens (bos/eos not counted) and, if set, pairs with
    max(len) / min(len) above `max_len_ratio`."""
    src_len, tgt_len = data.src_lengths, data.tgt_lengths
    empty = (src_len == 0) | (tgt_len == 0)
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
