"""Tests for transformer/model/positional_encoding.py against the closed form of section 3.5."""

import math

import torch

from transformer.model.positional_encoding import PositionalEncoding, sinusoidal_table


def test_values_match_the_paper_formula():
    d_model = 512
    table = sinusoidal_table(torch.arange(100), d_model)
    for pos in (0, 1, 7, 50, 99):
        for i in (0, 1, 10, 100, 255):
            angle = pos / 10000 ** (2 * i / d_model)
            assert math.isclose(table[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(table[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)


def test_positions_past_the_table_are_computed_on_the_fly():
    pe = PositionalEncoding(16, dropout=0.0, max_positions=8).eval()
    x = torch.zeros(1, 20, 16)
    out = pe(x)
    torch.testing.assert_close(out[0], sinusoidal_table(torch.arange(20), 16))
    shifted = pe(torch.zeros(1, 3, 16), offset=10)
    torch.testing.assert_close(shifted[0], sinusoidal_table(torch.arange(10, 13), 16))


def test_dropout_applies_to_the_sum_in_training():
    pe = PositionalEncoding(8, dropout=0.5).train()
    out = pe(torch.ones(4, 10, 8))
    assert (out == 0).any()
    assert not (pe.eval()(torch.ones(4, 10, 8)) == 0).all()
