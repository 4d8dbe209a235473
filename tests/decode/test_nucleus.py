"""Tests for transformer/decode/nucleus.py against a brute-force nucleus.

The reference sorts each row in plain Python (float64; ties by token id, the lower first) and
keeps tokens while the mass before them is below p: the definition, with no buckets. Rows are
random (flat, medium, peaked, banned tokens, vocabularies from 1 to 32000 tokens); p is drawn
at random, or put halfway between two cumulative masses of the sorted row, so that float32
rounding cannot move the boundary (p then reaches nuclei of one token to nearly all, p near
1 included); ties are exact copies of one value.
"""

from __future__ import annotations

import math

import pytest
import torch

from transformer.decode.nucleus import BUCKETS, TOP, nucleus_weights, select_nucleus


def _sorted_row(log_probs: list[float]) -> tuple[list[int], list[float], float]:
    """The tokens by decreasing probability (ties: the lower id first), their weights, total."""
    weights = [math.exp(v) if v > -math.inf else 0.0 for v in log_probs]
    order = sorted(range(len(weights)), key=lambda i: (-weights[i], i))
    return order, [weights[i] for i in order], sum(weights)


def _brute_force(log_probs: list[float], top_p: float) -> dict[int, float]:
    """The nucleus of one row: token -> its probability renormalised within the nucleus."""
    order, weights, total = _sorted_row(log_probs)
    kept, mass = {}, 0.0
    for token, weight in zip(order, weights, strict=True):
        if mass >= top_p * total:
            break
        kept[token], mass = weight, mass + weight
    return {token: weight / mass for token, weight in kept.items()}


def _halfway_p(log_probs: list[float], size: int) -> tuple[float, float]:
    """A p whose nucleus has `size` tokens, halfway between two cumulative masses, and its
    distance to both of them (a fraction of the total)."""
    _, weights, total = _sorted_row(log_probs)
    before = sum(weights[: size - 1])
    return (before + weights[size - 1] / 2) / total, weights[size - 1] / 2 / total


def _check(log_probs: torch.Tensor, top_p: float) -> None:
    """The kept tokens and their renormalised probabilities equal the brute force's."""
    weights = nucleus_weights(log_probs, top_p)
    assert weights.dtype == torch.float32 and weights.shape == log_probs.shape
    for row, out in zip(log_probs.tolist(), weights, strict=True):
        expected = _brute_force(row, top_p)
        kept = out.nonzero().squeeze(1).tolist()
        assert kept == sorted(expected), (len(kept), len(expected), top_p)
        probs = (out[kept] / out.sum()).tolist()
        assert probs == pytest.approx([expected[t] for t in kept], rel=1e-5, abs=1e-9)


def _rows(generator: torch.Generator, count: int, vocab: int, scale: float) -> torch.Tensor:
    """`count` rows of log-probabilities: N(0, scale^2) logits, some tokens banned."""
    logits = torch.randn(count, vocab, generator=generator, dtype=torch.float64) * scale
    banned = torch.rand(count, vocab, generator=generator) < 0.05
    banned[:, 0] = False  # a row keeps a finite token
    log_probs = torch.log_softmax(logits, dim=-1).float()
    return log_probs.masked_fill(banned, float("-inf"))


@pytest.mark.parametrize("vocab", [1, 2, 7, 60, 3000])
@pytest.mark.parametrize("scale", [0.01, 0.5, 3.0, 30.0])  # flat to peaked
def test_random_rows_and_random_p(vocab, scale):
    generator = torch.Generator().manual_seed(vocab * 100 + int(scale * 10))
    log_probs = _rows(generator, 6, vocab, scale)
    for top_p in torch.rand(8, generator=generator, dtype=torch.float64).tolist():
        top_p = max(top_p, 1e-3)
        for row in log_probs:  # skip a p within float32 rounding of a cumulative mass
            _, weights, total = _sorted_row(row.tolist())
            cumulative = [sum(weights[:i]) / total for i in range(1, len(weights) + 1)]
            if all(abs(c - top_p) > 1e-5 for c in cumulative):
                _check(row.unsqueeze(0), top_p)


@pytest.mark.parametrize(
    "vocab, scale", [(500, 0.05), (8000, 0.3), (8000, 4.0), (32000, 0.1), (32000, 2.0)]
)
def test_nucleus_masses_from_one_token_to_nearly_all(vocab, scale):
    """For each mass level, the nucleus size it gives, then p halfway for that size: flat rows
    put the boundary among hundreds of near-equal tokens of one bucket, and p near 1 in the
    lightest buckets. A p within 1e-5 of a cumulative mass (the light tokens of peaked rows)
    is beyond float32 and skipped."""
    generator = torch.Generator().manual_seed(vocab + int(scale * 100))
    log_probs = _rows(generator, 2, vocab, scale)
    levels = [1e-3, 0.05, 0.2, 0.5, 0.7, 0.9, 0.95, 0.99, 0.999, 0.9999, 0.99999]
    for row in log_probs:
        _, weights, total = _sorted_row(row.tolist())
        probs = torch.tensor(weights, dtype=torch.float64) / total
        before = probs.cumsum(0) - probs  # the mass before each token
        checked = []
        for level in levels:
            size = int((before < level).sum())
            top_p, margin = _halfway_p(row.tolist(), size)
            if margin > 1e-5:
                _check(row.unsqueeze(0), top_p)
                assert int(nucleus_weights(row.unsqueeze(0), top_p).gt(0).sum()) == size
                checked.append(top_p)
        assert len(checked) >= 4
        if scale < 1:  # flat: nuclei of nearly the whole vocabulary
            assert max(checked) > 1 - 2 / vocab


def test_ties_keep_the_lower_ids_first():
    """Groups of equal probabilities (1/4 twice, 1/16 five times, 1/64 eight times, 1/256
    sixteen times, and five impossible tokens), shuffled: p inside a group keeps its lowest
    ids (p at least 8e-4 away from every cumulative mass)."""
    generator = torch.Generator().manual_seed(7)
    probs = torch.tensor([1 / 4] * 2 + [1 / 16] * 5 + [1 / 64] * 8 + [1 / 256] * 16 + [0.0] * 5)
    log_probs = probs[torch.randperm(len(probs), generator=generator)].log().unsqueeze(0)
    for top_p in [0.1, 0.3, 0.55, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99, 0.999]:
        _check(log_probs, top_p)


def test_flat_rows_of_a_power_of_two_vocabulary_keep_exactly_p_times_v_tokens():
    """All tokens equal (1/V each): the nucleus is the ceil(p * V) lowest ids, the boundary
    exactly at p included (the token whose mass before is p is not kept)."""
    for vocab in [4, 1024, 16384]:
        log_probs = torch.zeros(3, vocab)
        for top_p in [0.25, 0.5, 0.9, 1 - 1 / vocab, 0.999999]:
            kept = nucleus_weights(log_probs, top_p).gt(0)
            size = math.ceil(top_p * vocab)
            assert kept[:, :size].all() and not kept[:, size:].any(), (vocab, top_p)


def test_one_token_above_p_is_the_whole_nucleus_and_p_near_1_keeps_the_light_tokens():
    probs = torch.tensor([[0.9, 0.06, 0.04 - 1e-4, 1e-4, 0.0], [1e-4, 0.3, 0.2 - 1e-4, 0.5, 0.0]])
    log_probs = probs.log()
    assert nucleus_weights(log_probs, 0.45).gt(0).tolist() == [
        [True, False, False, False, False],
        [False, False, False, True, False],
    ]
    # the 1e-4 tokens weigh more than (1 - p) / (2V) = 5e-6: in the nucleus; banned ones never
    near_one = nucleus_weights(log_probs, 0.99995).gt(0)
    assert near_one.tolist() == [[True, True, True, True, False], [True, True, True, True, False]]
    assert BUCKETS >= 256  # the resolution the module docstring counts on


def test_unnormalised_rows_and_temperature_shifts_give_the_same_nucleus():
    """Only differences of log-probabilities matter (a constant per row changes nothing)."""
    generator = torch.Generator().manual_seed(3)
    log_probs = torch.log_softmax(torch.randn(4, 500, generator=generator), dim=-1)
    shifted = log_probs + torch.tensor([[30.0], [-50.0], [0.0], [7.5]])
    expected = nucleus_weights(log_probs, 0.7).gt(0)
    assert torch.equal(nucleus_weights(shifted, 0.7).gt(0), expected)


def test_a_batch_settles_each_row_its_own_way_as_alone():
    """A peaked row (settled among the TOP most probable), a medium one (more than TOP tokens,
    all sorted from the buckets) and a flat one (bucketed, kept over the vocabulary)."""
    generator = torch.Generator().manual_seed(11)
    logits = torch.randn(3, 2000, generator=generator, dtype=torch.float64)
    logits[0, 5] += 12.0  # one token of probability about 0.9
    logits[1, :40] += 6.0  # about 40 likely tokens
    logits[2] *= 0.1
    log_probs = torch.log_softmax(logits, dim=-1).float()
    top_p = 0.8
    found = select_nucleus(log_probs, top_p)
    assert found.listed.tolist() == [True, True, False]
    sizes = nucleus_weights(log_probs, top_p).gt(0).sum(dim=1).tolist()
    assert sizes[0] <= TOP < sizes[1] <= 128 < sizes[2]
    _check(log_probs, top_p)
    for row in range(3):
        alone = nucleus_weights(log_probs[row : row + 1], top_p)
        assert torch.equal(alone[0], nucleus_weights(log_probs, top_p)[row])


def test_ties_across_the_top_candidates_are_settled_by_id():
    """20 tokens of probability 0.04 and 8 of 0.025, shuffled: with p = 0.5 the nucleus is the
    13 lowest ids of the 20, though `torch.topk` may return any 16 of them; with p = 0.82 one
    of the 0.025 joins (the lowest id)."""
    generator = torch.Generator().manual_seed(12)
    probs = torch.tensor([0.04] * 20 + [0.025] * 8)
    log_probs = probs[torch.randperm(28, generator=generator)].log().unsqueeze(0)
    for top_p in [0.5, 0.82]:
        _check(log_probs, top_p)
