"""Tests for transformer/model/feed_forward.py (equation 2)."""

import torch

from transformer.model.feed_forward import PositionwiseFeedForward


def test_equation_2():
    ffn = PositionwiseFeedForward(8, 32)
    x = torch.randn(2, 3, 8)
    w1, b1, w2, b2 = ffn.linear1.weight, ffn.linear1.bias, ffn.linear2.weight, ffn.linear2.bias
    expected = torch.clamp(x @ w1.T + b1, min=0) @ w2.T + b2
    torch.testing.assert_close(ffn(x), expected)
