"""Tests for transformer/decode/search.py: the start that greedy and beam search share.

Sources must be right-padded: the positional encoding counts from column 0, so a left-padded
row would be encoded at shifted positions. `start_decoding` refuses such a row, naming it.
"""

from __future__ import annotations

import pytest
import torch

from tests.decode.test_greedy import random_batch, tiny_model
from transformer.decode.beam_search import beam_search
from transformer.decode.greedy import greedy_search
from transformer.decode.search import start_decoding


@pytest.mark.parametrize("search", [greedy_search, beam_search], ids=["greedy", "beam"])
def test_left_padded_source_is_refused_naming_the_row(search):
    model = tiny_model()
    src = random_batch(0, 40, [5, 3, 5, 2])  # right-padded, pad_id 0
    src[3] = src[3].roll(3)  # (x, y, pad, pad, pad) -> (pad, pad, pad, x, y)
    message = r"^src row 3 has padding before a real token \(sources must be right-padded"
    with pytest.raises(ValueError, match=message):
        search(model, src)


def test_padding_mask_with_a_hole_is_refused():
    model = tiny_model()
    src = random_batch(1, 40, [4, 4, 4])
    mask = torch.zeros(3, 4, dtype=torch.bool)
    mask[1, 1] = mask[2, 0] = True  # rows 1 and 2 mask a position before a real token
    with pytest.raises(ValueError, match="^src row 1 has padding before a real token"):
        start_decoding(model, src, mask, 1.0, 5, use_cache=True)


def test_right_padded_and_all_padding_rows_are_accepted():
    model = tiny_model()
    src = random_batch(2, 40, [5, 1, 3])
    src[1] = model.config.pad_id  # an empty source is right-padded too
    _, max_lens = start_decoding(model, src, None, 1.0, 5, use_cache=True)
    assert max_lens == [10, 5, 8]
