"""Tests for transformer/decode/inversion.py: the inverse-CDF draw equals a plain-Python walk
over the cumulative weights (short rows, and long rows of several blocks with zeros and empty
blocks), and never picks a token of weight 0 when u * total rounds up."""

from __future__ import annotations

import torch

from transformer.decode.inversion import draw


def test_draw_walks_the_cumulative_probabilities():
    probs = torch.tensor([[0.0, 0.2, 0.0, 0.5, 0.3, 0.0], [0.1, 0.0, 0.0, 0.0, 0.0, 0.9]])
    for u in [
        0.0,
        0.05,
        0.15,
        0.199,
        0.201,
        0.65,
        0.69,
        0.701,
        0.95,
        0.999999,
    ]:  # off the boundaries
        tokens = draw(probs, torch.tensor([u, u])).tolist()
        for row in range(2):
            cumulative, expected = 0.0, None
            for token, p in enumerate(probs[row].tolist()):
                cumulative += p
                if cumulative > u * float(probs[row].sum()) and expected is None:
                    expected = token
            assert tokens[row] == expected, (u, row)
    # u * total rounding up to the total never picks a token of probability 0
    assert draw(torch.tensor([[0.5, 0.5, 0.0]]), torch.tensor([1.0])).tolist() == [1]


def test_draw_walks_long_rows_block_by_block():
    """Rows longer than a block (300 = 4 blocks of 64 and one of 44), with zeros and empty
    blocks: the same first token as a plain walk over the cumulative weights, in float64
    (u within 1e-5 of a cumulative weight are skipped: float32 rounding)."""
    generator = torch.Generator().manual_seed(5)
    weights = torch.rand(3, 300, generator=generator)
    weights[weights < 0.3] = 0.0
    weights[1, :130] = 0.0  # the first two blocks empty
    weights[2, 200:] = 0.0  # the last blocks empty
    checked = 0
    for u in torch.rand(200, generator=generator).tolist():
        tokens = draw(weights, torch.full((3,), u)).tolist()
        for row in range(3):
            values = weights[row].double()
            cumulative = (values.cumsum(0) / values.sum()).tolist()
            if min(abs(c - u) for c in cumulative) < 1e-5:
                continue
            assert tokens[row] == next(i for i, c in enumerate(cumulative) if c > u)
            checked += 1
    assert checked > 500
    # u * total rounding up to the total: the last token of positive weight
    assert draw(weights, torch.ones(3)).tolist() == [
        int(weights[row].nonzero().max()) for row in range(3)
    ]
