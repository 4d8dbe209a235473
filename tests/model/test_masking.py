"""Tests for transformer/model/masking.py."""

import torch

from transformer.model.masking import causal_mask, padding_mask


def test_causal_mask_is_strict_upper_triangle():
    expected = torch.ones(4, 4, dtype=torch.bool).triu(1)
    assert torch.equal(causal_mask(4), expected)


def test_causal_mask_with_offset_matches_bottom_rows_of_full_mask():
    full = causal_mask(7)
    assert torch.equal(causal_mask(3, 7, offset=4), full[4:])


def test_padding_mask():
    tokens = torch.tensor([[5, 6, 0], [0, 0, 0]])
    assert padding_mask(tokens, 0).tolist() == [[False, False, True], [True, True, True]]
