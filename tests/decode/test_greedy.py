"""Tests for transformer/decode/greedy.py: greedy search (length rules: test_search.py).

Greedy outputs are checked against a teacher-forced forward of the full model (the argmax at
every position, and the summed log-probability), against decoding without the cache, and
against decoding each sentence alone.
"""

from __future__ import annotations

import math

import pytest

from transformer.decode.greedy import greedy_search


def test_greedy_matches_teacher_forced_argmax_and_log_prob(
    make_search_model, random_batch, teacher_forced_log_prob
):
    model = make_search_model()
    src = random_batch(0, 40, [5, 9, 3, 7, 4, 6, 8, 2])
    hypotheses = greedy_search(model, src, max_len_a=1.0, max_len_b=6)
    config = model.config
    assert any(h.finished for h in hypotheses) and not all(h.finished for h in hypotheses)
    for row, h in enumerate(hypotheses):
        log_prob, log_probs = teacher_forced_log_prob(model, src[row], h.tokens, h.finished)
        target = h.tokens + ([config.eos_id] if h.finished else [])
        allowed = log_probs.clone()
        allowed[:, [config.pad_id, config.bos_id]] = -math.inf
        assert allowed.argmax(dim=-1).tolist() == target
        assert h.length == len(target)
        assert h.log_prob == pytest.approx(log_prob, abs=1e-5)
        assert h.score == pytest.approx(log_prob / ((5 + h.length) / 6) ** 0.6, abs=1e-5)
        if not h.finished:
            assert h.length == int(src[row].ne(0).sum()) + 6


def test_greedy_cache_equals_recomputing_the_prefix(make_search_model, random_batch):
    model = make_search_model()
    src = random_batch(2, 40, [5, 9, 3, 7, 4, 6, 8, 2])
    cached = greedy_search(model, src, max_len_b=8)
    recomputed = greedy_search(model, src, max_len_b=8, use_cache=False)
    for a, b in zip(cached, recomputed, strict=True):
        assert a.tokens == b.tokens and a.finished == b.finished
        assert a.score == pytest.approx(b.score, abs=1e-5)


def test_greedy_sentence_alone_equals_in_batch(make_search_model, random_batch):
    model = make_search_model()
    lengths = [5, 9, 3, 7, 4, 6, 8, 2]
    src = random_batch(4, 40, lengths)
    batched = greedy_search(model, src, max_len_b=7)
    for row, length in enumerate(lengths):
        alone = greedy_search(model, src[row : row + 1, :length], max_len_b=7)[0]
        assert alone.tokens == batched[row].tokens
        assert alone.score == pytest.approx(batched[row].score, abs=1e-5)


def test_greedy_respects_max_positions_and_never_emits_pad_or_bos(make_search_model, random_batch):
    model = make_search_model(eos_boost=0.0, max_positions=5)  # eos embedding zeroed
    src = random_batch(4, 40, [3, 6])
    for h in greedy_search(model, src, max_len_b=50):
        assert h.length <= 5
        assert not set(h.tokens) & {0, 2}
