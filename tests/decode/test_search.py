"""Tests for transformer/decode/search.py: what greedy and beam search share (the length
penalty, the maximum output length and the start of decoding).

Sources must be right-padded: the positional encoding counts from column 0, so a left-padded
row would be encoded at shifted positions. `start_decoding` refuses such a row, naming it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

from transformer.decode.beam_search import beam_search
from transformer.decode.greedy import greedy_search
from transformer.decode.search import (
    Hypothesis,
    length_penalty,
    max_output_lengths,
    start_decoding,
)


def test_length_penalty_closed_forms():
    assert length_penalty(7, 0.6) == pytest.approx(((5 + 7) / 6) ** 0.6)
    assert length_penalty(1, 0.6) == pytest.approx(1.0)  # ((5 + 1) / 6) ** alpha
    assert length_penalty(7, 0.6, "power") == pytest.approx(7**0.6)
    assert length_penalty(9, 0.0) == 1.0


def test_max_output_lengths_formula_and_bounds():
    lengths = torch.tensor([1, 10, 2000])
    assert max_output_lengths(lengths, 1.0, 50, 1024) == [51, 60, 1024]
    assert max_output_lengths(lengths, 1.5, 0, 1024) == [1, 15, 1024]
    assert max_output_lengths(torch.tensor([3]), 0.0, 0, 1024) == [1]  # at least one token


@pytest.mark.parametrize("a", [0.0, 0.5, 1e19, 1e300, 1.7e308, 2**70])
@pytest.mark.parametrize(
    "b", [0, 7, 2**31, 2**63, 2**64 + 1, 10**400], ids=["0", "7", "2^31", "2^63", "2^64+1", "1e400"]
)
def test_max_output_lengths_equal_the_closed_form_for_huge_settings(a, b):
    lengths = [0, 1, 3, 2000]
    positions = 1024

    # min(floor(a * S + b), positions), at least 1, in exact rational arithmetic
    expected = [max(1, min(math.floor(Fraction(a) * s + b), positions)) for s in lengths]
    assert max_output_lengths(torch.tensor(lengths), a, b, positions) == expected


@pytest.mark.parametrize("search", [greedy_search, beam_search], ids=["greedy", "beam"])
def test_a_huge_length_multiplier_means_the_positional_limit(
    make_search_model, random_batch, search
):
    model = make_search_model(eos_boost=0.0, max_positions=12)
    src = random_batch(3, 40, [4, 2])
    capped = search(model, src, max_len_a=0.0, max_len_b=12)  # the limit, spelt directly
    first = [h if isinstance(h, Hypothesis) else h[0] for h in capped]  # beam: n-best lists
    assert max(len(h.tokens) for h in first) > 1  # the reference decodes past one token
    for settings in (dict(max_len_a=1e19), dict(max_len_b=2**63), dict(max_len_a=1e300)):
        assert search(model, src, **settings) == capped


@pytest.mark.parametrize("search", [greedy_search, beam_search], ids=["greedy", "beam"])
def test_left_padded_source_is_refused_naming_the_row(make_search_model, random_batch, search):
    model = make_search_model()
    src = random_batch(0, 40, [5, 3, 5, 2])  # right-padded, pad_id 0
    src[3] = src[3].roll(3)  # (x, y, pad, pad, pad) -> (pad, pad, pad, x, y)
    message = r"^src row 3 has padding before a real token \(sources must be right-padded"
    with pytest.raises(ValueError, match=message):
        search(model, src)


def test_padding_mask_with_a_hole_is_refused(make_search_model, random_batch):
    model = make_search_model()
    src = random_batch(1, 40, [4, 4, 4])
    mask = torch.zeros(3, 4, dtype=torch.bool)
    mask[1, 1] = mask[2, 0] = True  # rows 1 and 2 mask a position before a real token
    with pytest.raises(ValueError, match="^src row 1 has padding before a real token"):
        start_decoding(model, src, mask, 1.0, 5, use_cache=True)


def test_right_padded_and_all_padding_rows_are_accepted(make_search_model, random_batch):
    model = make_search_model()
    src = random_batch(2, 40, [5, 1, 3])
    src[1] = model.config.pad_id  # an empty source is right-padded too
    _, max_lens = start_decoding(model, src, None, 1.0, 5, use_cache=True)
    assert max_lens == [10, 5, 8]
