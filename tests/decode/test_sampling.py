"""Tests for transformer/decode/sampling.py, each against an independent reference.

- the reshaped distribution (temperature, top-k, top-p) equals a plain-Python computation;
- temperature near 0 gives greedy search's output and scores;
- the first-token frequencies of many samples match the reshaped distribution of a
  teacher-forced forward (within 5 standard errors);
- scores are teacher-forced log-probabilities; samples are reproducible and do not depend on
  the batch.
"""

from __future__ import annotations

import math

import pytest
import torch

from transformer.decode.greedy import greedy_search
from transformer.decode.sampling import (
    sample_search,
    sampling_weights,
    stream_seed,
)

LENGTHS = [5, 9, 3, 7, 4]


def _reference_probs(log_probs: list[float], temperature, top_k, top_p) -> list[float]:
    """The reshaped distribution of one row, in plain Python."""
    weights = [math.exp(v / temperature) if v > -math.inf else 0.0 for v in log_probs]
    order = sorted(range(len(weights)), key=lambda i: -weights[i])
    keep = set(order[:top_k]) if top_k else set(order)
    kept = [weights[i] if i in keep else 0.0 for i in range(len(weights))]
    total, mass, nucleus = sum(kept), 0.0, set()
    for i in sorted(keep, key=lambda i: -kept[i]):
        if mass >= top_p * total:
            break
        nucleus.add(i)
        mass += kept[i]
    final = [kept[i] if i in nucleus else 0.0 for i in range(len(kept))]
    return [w / sum(final) for w in final]


@pytest.mark.parametrize(
    "temperature, top_k, top_p",
    [(1.0, 0, 1.0), (0.5, 0, 1.0), (2.0, 3, 1.0), (1.0, 0, 0.6), (0.7, 4, 0.8)],
)
def test_sampling_probs_equal_the_plain_python_reshaping(temperature, top_k, top_p):
    generator = torch.Generator().manual_seed(0)
    log_probs = torch.log_softmax(torch.randn(3, 7, generator=generator), dim=-1)
    log_probs[:, 0] = float("-inf")  # a banned token
    weights = sampling_weights(log_probs, temperature, top_k, top_p)
    probs = weights / weights.sum(dim=-1, keepdim=True)
    for row in range(3):
        expected = _reference_probs(log_probs[row].tolist(), temperature, top_k, top_p)
        assert probs[row].tolist() == pytest.approx(expected, abs=1e-6)
    assert probs[:, 0].eq(0).all()


@pytest.mark.parametrize("top_p", [0.3, 0.9, 0.999])
def test_the_nucleus_of_a_large_vocabulary_is_the_sorted_prefix(top_p):
    """Rows settled by the top 16, 64, ... or only by the whole vocabulary: one rule."""
    generator = torch.Generator().manual_seed(1)
    scales = torch.tensor([[8.0], [3.0], [0.1]])  # peaked, medium, flat rows
    log_probs = torch.log_softmax(torch.randn(3, 3000, generator=generator) * scales, dim=-1)
    weights = sampling_weights(log_probs, top_p=top_p)
    for row in range(3):
        probs = log_probs[row].exp()
        ordered = probs.sort(descending=True).values
        size = int(((ordered.cumsum(0) - ordered) < top_p * probs.sum()).sum())
        assert int(weights[row].gt(0).sum()) == size


def test_temperature_near_zero_is_greedy_search(make_search_model, random_batch):
    model = make_search_model()
    src = random_batch(0, 40, LENGTHS)
    greedy = greedy_search(model, src, max_len_b=6)
    sampled = sample_search(model, src, seeds=range(5), temperature=1e-6, max_len_b=6)
    assert any(h.finished for h in greedy)
    for g, (s,) in zip(greedy, sampled, strict=True):
        assert s.tokens == g.tokens and s.finished == g.finished
        assert s.score == pytest.approx(g.score, abs=1e-6)


def test_first_token_frequencies_match_the_reshaped_distribution(
    make_search_model, random_batch, teacher_forced_log_prob
):
    model = make_search_model(vocab_size=12, eos_boost=1.0)
    src = random_batch(1, 12, [4])
    n, temperature, top_k = 4000, 0.8, 6
    (samples,) = sample_search(
        model,
        src,
        [11],
        num_samples=n,
        temperature=temperature,
        top_k=top_k,
        max_len_a=0.0,
        max_len_b=1,
    )
    _, log_probs = teacher_forced_log_prob(model, src[0], [], True)  # position 0: (1, V)
    first = log_probs[0].tolist()
    first[model.config.pad_id] = first[model.config.bos_id] = -math.inf
    expected = _reference_probs(first, temperature, top_k, 1.0)
    counts = [0] * len(expected)
    for h in samples:
        counts[h.tokens[0] if h.tokens else model.config.eos_id] += 1
    for p, count in zip(expected, counts, strict=True):
        assert abs(count / n - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-9, (counts, expected)
    assert sum(c > 0 for c in counts) == top_k  # exactly the top k tokens are drawn


def test_scores_are_teacher_forced_and_samples_reproducible_and_batch_independent(
    make_search_model, random_batch, teacher_forced_log_prob
):
    model = make_search_model()
    src = random_batch(2, 40, LENGTHS)
    seeds = [stream_seed(5, i) for i in range(len(LENGTHS))]
    settings = dict(num_samples=3, top_p=0.9, max_len_b=6)
    batched = sample_search(model, src, seeds, **settings)
    assert sample_search(model, src, seeds, **settings) == batched  # the same seeds: the same
    other = sample_search(model, src, [s + 1 for s in seeds], **settings)
    assert [h.tokens for s in other for h in s] != [h.tokens for s in batched for h in s]
    for row, length in enumerate(LENGTHS):
        alone = sample_search(model, src[row : row + 1, :length], seeds[row : row + 1], **settings)
        assert [h.tokens for h in alone[0]] == [h.tokens for h in batched[row]]
        for h in batched[row]:
            log_prob, _ = teacher_forced_log_prob(model, src[row], h.tokens, h.finished)
            assert h.log_prob == pytest.approx(log_prob, abs=1e-5)
            assert h.score == pytest.approx(log_prob / ((5 + h.length) / 6) ** 0.6, abs=1e-5)
    assert len({tuple(h.tokens) for s in batched for h in s}) > len(LENGTHS)  # samples differ


def test_cache_equals_recomputing_the_prefix(make_search_model, random_batch):
    model = make_search_model()
    src = random_batch(3, 40, LENGTHS)
    cached = sample_search(model, src, range(5), num_samples=2, top_k=5, max_len_b=6)
    recomputed = sample_search(
        model, src, range(5), num_samples=2, top_k=5, max_len_b=6, use_cache=False
    )
    assert [[h.tokens for h in s] for s in cached] == [[h.tokens for h in s] for s in recomputed]


def test_stream_seeds_are_distinct_and_63_bit():
    seeds = {stream_seed(seed, index) for seed in range(20) for index in range(50)}
    assert len(seeds) == 1000 and all(0 <= s < 2**63 for s in seeds)
    assert stream_seed(1, 2) == stream_seed(1, 2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_draws_the_cpu_samples(make_search_model, random_batch):
    """The uniforms come from CPU generators, so a device changes the draws only through
    float rounding of the probabilities (checked here on samples away from ties)."""
    model = make_search_model()
    src = random_batch(4, 40, LENGTHS)
    prefix = [[7], [], [8, 9], [], [10]]
    settings = dict(num_samples=2, top_p=0.9, temperature=0.8, max_len_b=6, prefix=prefix)
    cpu = sample_search(model, src, range(5), **settings)
    model.cuda()
    try:
        gpu = sample_search(model, src.cuda(), range(5), **settings)
    finally:
        model.cpu()
    same = sum(
        a.tokens == b.tokens
        for s, t in zip(cpu, gpu, strict=True)
        for a, b in zip(s, t, strict=True)
    )
    assert same >= 8  # of 10 samples
    assert all(h.tokens[: len(p)] == p for s, p in zip(gpu, prefix, strict=True) for h in s)
