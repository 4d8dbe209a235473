"""Tests for transformer/decode/nucleus_draw.py against a brute-force nucleus.

- `in_nucleus` says of every token of a row what a plain-Python sort says (ties by id);
- the rejection draw's distribution, taken exactly over an even grid of its two uniform
  numbers (one proposal, then the exact draw), equals each token's probability within the
  nucleus (closed form), flat and peaked rows, ties and banned tokens included; a draw that
  reused the first number for rejected rows would fail it; with several proposals, the
  frequencies of many random draws match within 5 standard errors;
- a row draws alike alone and in any batch;
- the exact nucleus draw (`exact_nucleus_draw`) gives each token its nucleus probability over
  evenly spread numbers, flat rows over the vocabulary and peaked ones among few candidates.
"""

from __future__ import annotations

import math

import pytest
import torch

from transformer.decode.inversion import draw
from transformer.decode.nucleus import FLOOR, nucleus_weights, select_nucleus
from transformer.decode.nucleus_draw import exact_nucleus_draw, in_nucleus, nucleus_draw


def _brute_force(log_probs: list[float], top_p: float) -> dict[int, float]:
    """The nucleus of one row: token -> its probability within the nucleus (float64)."""
    weights = [math.exp(v) if v > -math.inf else 0.0 for v in log_probs]
    order = sorted(range(len(weights)), key=lambda i: (-weights[i], i))
    kept, mass, total = {}, 0.0, sum(weights)
    for token in order:
        if mass >= top_p * total:
            break
        kept[token], mass = weights[token], mass + weights[token]
    return {token: weight / mass for token, weight in kept.items()}


def _rows(vocab: int = 60) -> torch.Tensor:
    """Log-probabilities of flat to peaked rows; one of them with exact ties, some banned."""
    generator = torch.Generator().manual_seed(11)
    scales = torch.tensor([[0.1], [1.0], [3.0], [8.0]])  # (4, 1)
    logits = torch.randn(4, vocab, generator=generator) * scales  # (4, V)
    tied = torch.randint(0, 4, (1, vocab), generator=generator).float()  # (1, V) 4 values
    log_probs = torch.log_softmax(torch.cat([logits, tied]), dim=-1)  # (5, V)
    log_probs[:, [5, 17]] = float("-inf")
    return log_probs


@pytest.mark.parametrize("top_p", [0.3, 0.9, 0.99])
def test_in_nucleus_is_the_sorted_prefix(top_p):
    log_probs = _rows()
    R, V = log_probs.shape
    best = log_probs.amax(dim=1, keepdim=True)
    weights = (log_probs - best).clamp(min=FLOOR).exp()  # as nucleus_draw weighs them
    limit = top_p * weights.sum(dim=1)
    for token in range(V):
        tokens = torch.full((R,), token)
        got = in_nucleus(weights, tokens, limit).tolist()
        expected = [token in _brute_force(row, top_p) for row in log_probs.tolist()]
        assert got == expected, token


@pytest.mark.parametrize("top_p", [0.5, 0.9])
def test_draws_over_a_grid_give_each_token_its_nucleus_probability(top_p):
    """N x M evenly spread (u, u') pairs: the proposal's grid gives each token its share up
    to 1/N, the rejected rows' exact draw up to 1/M, so the frequencies are the nucleus
    probabilities within 2/N + 1/M."""
    log_probs = _rows()
    n = m = 160
    u = (torch.arange(n, dtype=torch.float64) + 0.5) / n
    u, fallback = u.repeat(m).float(), u.repeat_interleave(n).float().unsqueeze(1)  # (n*m, 1)
    rejected_rows = 0
    for row in log_probs:
        tokens = nucleus_draw(row.expand(n * m, -1), top_p, u, fallback)
        counts = torch.bincount(tokens, minlength=row.numel()).double() / (n * m)
        expected = torch.zeros_like(counts)
        for token, prob in _brute_force(row.tolist(), top_p).items():
            expected[token] = prob
        assert counts[expected.eq(0)].sum() == 0  # only nucleus tokens
        assert (counts - expected).abs().max() <= 2 / n + 1 / m
        weights = (row - row.max()).exp()
        proposal = torch.multinomial(weights, 2000, replacement=True, generator=None)
        kept = in_nucleus(weights.expand(2000, -1), proposal, top_p * weights.sum().expand(2000))
        rejected_rows += int((~kept).sum())
    assert rejected_rows > 0  # the fallback was exercised


def test_reusing_the_first_number_for_rejected_rows_would_be_caught():
    """The grid test's reference distinguishes the right draw from a biased one."""
    log_probs, top_p, n = _rows()[1:2], 0.5, 400
    u = (torch.arange(n, dtype=torch.float64) + 0.5) / n
    biased = nucleus_draw(log_probs.expand(n, -1), top_p, u.float(), u.float().unsqueeze(1))
    counts = torch.bincount(biased, minlength=log_probs.shape[1]).double() / n
    expected = torch.zeros_like(counts)
    for token, prob in _brute_force(log_probs[0].tolist(), top_p).items():
        expected[token] = prob
    assert (counts - expected).abs().max() > 3 / n


def test_a_row_draws_alike_alone_and_in_any_batch():
    log_probs = _rows(500)
    mixed = log_probs[torch.arange(40) * 3 % 5]  # (40, V) the rows in another order
    generator = torch.Generator().manual_seed(2)
    u, fallback = torch.rand(40, generator=generator), torch.rand(40, 1, generator=generator)
    alone = [
        int(nucleus_draw(mixed[r : r + 1], 0.9, u[r : r + 1], fallback[r : r + 1]))
        for r in range(40)
    ]
    assert nucleus_draw(mixed, 0.9, u, fallback).tolist() == alone
    # the token is the whole distribution's inverse-CDF draw when that one is in the
    # nucleus, else the exact nucleus draw of the second number
    proposal = draw((mixed - mixed.amax(dim=1, keepdim=True)).exp(), u).tolist()
    exact = exact_nucleus_draw(mixed, 0.9, fallback[:, 0]).tolist()
    for r in range(40):
        inside = proposal[r] in _brute_force(mixed[r].tolist(), 0.9)
        assert alone[r] == (proposal[r] if inside else exact[r])
    assert any(p not in _brute_force(mixed[r].tolist(), 0.9) for r, p in enumerate(proposal))


def test_several_proposals_give_each_token_its_nucleus_probability():
    """k = 3 numbers after the first: two more proposals, then the exact draw; at p = 0.3 a
    flat row rejects most proposals, so every stage draws."""
    log_probs, top_p, n = _rows()[:3], 0.3, 60_000
    generator = torch.Generator().manual_seed(5)
    for row in log_probs:
        u = torch.rand(n, generator=generator)
        retries = torch.rand(n, 3, generator=generator)
        tokens = nucleus_draw(row.expand(n, -1), top_p, u, retries)
        counts = torch.bincount(tokens, minlength=row.numel()).double() / n
        expected = torch.zeros_like(counts)
        for token, prob in _brute_force(row.tolist(), top_p).items():
            expected[token] = prob
        assert counts[expected.eq(0)].sum() == 0
        error = (expected * (1 - expected) / n).sqrt()
        assert ((counts - expected).abs() <= 5 * error + 1e-12).all()


def test_no_rows_draw_no_tokens():
    empty = torch.zeros(0, 70)
    assert nucleus_draw(empty, 0.9, torch.rand(0), torch.rand(0, 3)).shape == (0,)
    assert draw(empty, torch.rand(0)).shape == (0,)


def test_exact_nucleus_draws_give_each_token_its_nucleus_probability():
    """Inversion: of N evenly spread u, a token of probability q gets q * N of them, up to
    one. Flat rows draw over the vocabulary, peaked ones among their few candidates; a row
    draws alike in any batch."""
    generator = torch.Generator().manual_seed(4)
    scales = torch.tensor([[0.2], [1.0], [6.0], [12.0]])  # flat to peaked
    log_probs = torch.log_softmax(torch.randn(4, 1000, generator=generator) * scales, dim=-1)
    log_probs[:, 7] = float("-inf")
    top_p, n = 0.9, 4000
    assert select_nucleus(log_probs, top_p).listed.tolist() == [False, False, True, True]
    uniforms = (torch.arange(n, dtype=torch.float64) + 0.5) / n
    probs = nucleus_weights(log_probs, top_p)
    probs = probs / probs.sum(dim=-1, keepdim=True)
    for row in range(4):
        tokens = exact_nucleus_draw(log_probs[row].expand(n, -1), top_p, uniforms.float())
        counts = torch.bincount(tokens, minlength=1000)
        assert counts[probs[row].eq(0)].sum() == 0  # only nucleus tokens
        assert (counts / n - probs[row]).abs().max() <= 1 / n + 1e-6
    mixed = torch.stack([log_probs[row % 4] for row in [3, 0, 2, 1, 1, 3]])
    u = torch.rand(6, generator=generator)
    alone = [int(exact_nucleus_draw(mixed[r : r + 1], top_p, u[r : r + 1])) for r in range(6)]
    assert exact_nucleus_draw(mixed, top_p, u).tolist() == alone
