"""Tests for transformer/data/dataset.py: flat token storage, rows, and the pair filters.

References: plain Python loops over the pairs (for `ParallelDataset.select` and every rule of
`filter_pairs`).
"""

from __future__ import annotations

import numpy as np
import pytest

from transformer.data.dataset import DropReport, ParallelDataset, filter_pairs


def dataset_of(pairs: list[tuple[list[int], list[int]]]) -> ParallelDataset:
    """A ParallelDataset holding `pairs` of (source ids, target ids), built by hand."""

    def flat(rows):
        offsets = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
        return np.array([t for r in rows for t in r], dtype=np.uint16), offsets

    src_tokens, src_offsets = flat([s for s, _ in pairs])
    tgt_tokens, tgt_offsets = flat([t for _, t in pairs])
    lines = np.arange(len(pairs), dtype=np.int64)
    return ParallelDataset(src_tokens, src_offsets, tgt_tokens, tgt_offsets, lines)


def random_pairs(seed: int, n: int, max_len: int = 12) -> list[tuple[list[int], list[int]]]:
    rng = np.random.default_rng(seed)
    return [
        tuple(rng.integers(4, 60, int(rng.integers(0, max_len))).tolist() for _ in range(2))
        for _ in range(n)
    ]


def test_items_and_lengths_are_the_pairs():
    pairs = random_pairs(0, 50)
    data = dataset_of(pairs)
    assert len(data) == 50
    for i, (src, tgt) in enumerate(pairs):
        assert data[i][0].tolist() == src and data[i][1].tolist() == tgt
    assert data.src_lengths.tolist() == [len(s) for s, _ in pairs]
    assert data.tgt_lengths.tolist() == [len(t) for _, t in pairs]


def test_select_keeps_the_masked_pairs_in_order_with_their_line_numbers():
    pairs = random_pairs(1, 40)
    keep = np.random.default_rng(2).random(40) < 0.5
    kept = dataset_of(pairs).select(keep)
    expected = [i for i in range(40) if keep[i]]
    assert kept.line_numbers.tolist() == expected
    assert [(s.tolist(), t.tolist()) for s, t in (kept[i] for i in range(len(kept)))] == [
        pairs[i] for i in expected
    ]
    assert len(dataset_of(pairs).select(np.zeros(40, dtype=bool))) == 0


def test_select_shares_the_token_arrays_and_selects_again():
    pairs = random_pairs(5, 30)
    data = dataset_of(pairs)
    first = data.select(np.arange(30) % 2 == 0)
    assert first.src_tokens is data.src_tokens and first.tgt_offsets is data.tgt_offsets
    second = first.select(np.arange(15) % 3 == 0)  # rows of rows: corpus pairs 0, 6, 12, ...
    assert second.line_numbers.tolist() == list(range(0, 30, 6))
    assert [second[i][1].tolist() for i in range(len(second))] == [
        pairs[j][1] for j in range(0, 30, 6)
    ]
    assert second.tgt_lengths.tolist() == [len(pairs[j][1]) for j in range(0, 30, 6)]


def test_a_plain_dataset_is_the_same_every_epoch():
    data = dataset_of(random_pairs(5, 10))
    assert data.for_epoch(1, 1) is data and data.for_epoch(7, 3) is data


@pytest.mark.parametrize("max_len, max_len_ratio", [(8, None), (5, None), (9, 1.5), (8, 2.0)])
def test_filter_drops_exactly_what_the_rules_say_and_counts_each_pair_once(max_len, max_len_ratio):
    pairs = random_pairs(3, 300)
    data = dataset_of(pairs)
    kept, report = filter_pairs(data, max_len, max_len_ratio)

    reasons = []  # the first rule each pair breaks, by hand
    for s, t in pairs:
        if not s or not t:  # e.g. whitespace-only text, which encodes to no tokens
            reasons.append("empty")
        elif max(len(s), len(t)) > max_len:
            reasons.append("too_long")
        elif max_len_ratio is not None and max(len(s), len(t)) / min(len(s), len(t)) > (
            max_len_ratio
        ):
            reasons.append("bad_ratio")
        else:
            reasons.append(None)
    assert kept.line_numbers.tolist() == [i for i, r in enumerate(reasons) if r is None]
    counts = (report.empty, report.too_long, report.bad_ratio)
    assert counts == tuple(reasons.count(r) for r in ("empty", "too_long", "bad_ratio"))
    assert report.total == 300 and report.dropped == 300 - len(kept)
    assert report.empty > 0 and report.too_long > 0
    assert (report.bad_ratio > 0) == (max_len_ratio is not None)


def test_drop_report_text_names_every_count():
    report = DropReport(total=10, empty=2, too_long=1, bad_ratio=0, max_len=64, max_len_ratio=None)
    assert str(report) == "dropped 3 of 10 pairs: 2 empty, 1 longer than 64 tokens"
    report = DropReport(total=10, empty=0, too_long=1, bad_ratio=4, max_len=8, max_len_ratio=1.5)
    assert str(report) == (
        "dropped 5 of 10 pairs: 0 empty, 1 longer than 8 tokens, 4 with length ratio above 1.5"
    )
