"""Tests for transformer/decode/beam_search.py, each property against an independent reference.

- one beam = greedy search (tokens and scores);
- a sentence's result does not depend on the batch it is decoded in;
- the incremental cache gives what recomputing every prefix gives;
- with a beam wide enough to hold every hypothesis, the best (and n-best) output is what
  brute-force enumeration of all outputs finds;
- every returned score is the teacher-forced log-probability divided by the length penalty.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from transformer.decode.beam_search import _done_sentences, beam_search
from transformer.decode.greedy import greedy_search
from transformer.decode.search import Hypothesis, length_penalty

LENGTHS = [5, 9, 3, 7, 4, 6, 8, 2]


@pytest.mark.parametrize("src_seed", [0, 1, 2])
def test_one_beam_is_greedy(make_search_model, random_batch, src_seed):
    model = make_search_model()
    src = random_batch(src_seed, 40, LENGTHS)
    greedy = greedy_search(model, src, max_len_b=6)
    beam = beam_search(model, src, beam_size=1, max_len_b=6)
    assert any(h.finished for h in greedy)
    for g, (b,) in zip(greedy, beam, strict=True):
        assert b == g  # tokens, score, log_prob, length and finished, exactly


def test_sentence_alone_equals_in_any_batch(make_search_model, random_batch):
    model = make_search_model()
    src = random_batch(3, 40, LENGTHS)
    batched = beam_search(model, src, beam_size=4, nbest=2, max_len_b=6)
    permutation = [3, 0, 7, 5, 1, 6, 2, 4]
    permuted = beam_search(model, src[permutation], beam_size=4, nbest=2, max_len_b=6)
    for row, length in enumerate(LENGTHS):
        alone = beam_search(model, src[row : row + 1, :length], beam_size=4, nbest=2, max_len_b=6)
        for other in (batched[row], permuted[permutation.index(row)]):
            assert [h.tokens for h in other] == [h.tokens for h in alone[0]]
            for a, b in zip(other, alone[0], strict=True):
                assert a.score == pytest.approx(b.score, abs=1e-5)


@pytest.mark.parametrize("style", ["gnmt", "power"])
def test_cache_equals_recomputing_the_prefix(make_search_model, random_batch, style):
    model = make_search_model()
    src = random_batch(4, 40, LENGTHS)
    settings = dict(beam_size=5, nbest=5, max_len_b=6, length_penalty_style=style)
    cached = beam_search(model, src, **settings)
    recomputed = beam_search(model, src, use_cache=False, **settings)
    for a_list, b_list in zip(cached, recomputed, strict=True):
        assert [h.tokens for h in a_list] == [h.tokens for h in b_list]
        for a, b in zip(a_list, b_list, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-5)
            assert a.finished == b.finished


@pytest.mark.parametrize("nbest", [1, 4])
def test_scores_are_teacher_forced_log_probs_over_length_penalty(
    make_search_model, random_batch, teacher_forced_log_prob, nbest
):
    model = make_search_model()
    src = random_batch(5, 40, LENGTHS)
    for row, hypotheses in enumerate(
        beam_search(model, src, beam_size=4, nbest=nbest, length_penalty=0.6, max_len_b=6)
    ):
        assert len(hypotheses) == nbest
        assert [h.score for h in hypotheses] == sorted((h.score for h in hypotheses), reverse=True)
        assert len({tuple(h.tokens) + (h.finished,) for h in hypotheses}) == nbest
        for h in hypotheses:
            log_prob, _ = teacher_forced_log_prob(model, src[row], h.tokens, h.finished)
            assert h.length == len(h.tokens) + int(h.finished)
            lp = ((5 + h.length) / 6) ** 0.6
            assert h.log_prob == pytest.approx(log_prob, abs=1e-5)
            assert h.score == pytest.approx(log_prob / lp, abs=1e-5)
            assert h.finished or h.length == LENGTHS[row] + 6


def _brute_force(teacher_forced_log_prob, model, src_row, max_len, alpha, style):
    """Score every possible output: all sequences over the emittable tokens {unk, 4}, ending
    in eos (length <= max_len) or cut at max_len, by a teacher-forced forward each."""
    config = model.config
    words = [config.unk_id, 4]
    outputs = [(list(p), True) for n in range(max_len) for p in itertools.product(words, repeat=n)]
    outputs += [(list(p), False) for p in itertools.product(words, repeat=max_len)]
    scored = []
    for tokens, finished in outputs:
        log_prob, _ = teacher_forced_log_prob(model, src_row, tokens, finished)
        length = len(tokens) + int(finished)
        scored.append((log_prob / length_penalty(length, alpha, style), tokens, finished))
    return sorted(scored, key=lambda entry: entry[0], reverse=True)


@pytest.mark.parametrize("nbest", [1, 3])
@pytest.mark.parametrize(
    "alpha, style", [(0.6, "gnmt"), (0.0, "gnmt"), (2.0, "gnmt"), (1.0, "power")]
)
def test_wide_beam_finds_the_brute_force_optimum(
    make_search_model, random_batch, teacher_forced_log_prob, alpha, style, nbest
):
    # vocabulary pad, unk, bos, eos, 4: the decoder can emit 3 tokens (pad and bos are banned)
    model = make_search_model(vocab_size=5, eos_boost=1.0)
    src = random_batch(6, 5, [3, 1, 4])
    max_len = 6
    # a beam of 128 holds every live prefix (<= 2^5), every candidate (<= 3 * 2^5) and every
    # output ending in eos (2^6 - 1), so no hypothesis is ever pruned
    results = beam_search(
        model,
        src,
        beam_size=128,
        nbest=nbest,
        length_penalty=alpha,
        length_penalty_style=style,
        max_len_a=0.0,
        max_len_b=max_len,
    )
    for row, hypotheses in enumerate(results):
        expected = _brute_force(teacher_forced_log_prob, model, src[row], max_len, alpha, style)[
            :nbest
        ]
        assert [(h.tokens, h.finished) for h in hypotheses] == [(t, f) for _, t, f in expected]
        for h, (score, _, _) in zip(hypotheses, expected, strict=True):
            assert h.score == pytest.approx(score, abs=1e-5)


def test_max_length_is_respected(make_search_model, random_batch):
    model = make_search_model(eos_boost=0.0)
    src = random_batch(7, 40, [4, 2])
    for (h,) in beam_search(model, src, beam_size=3, max_len_a=0.0, max_len_b=3):
        assert h.length <= 3
        assert not set(h.tokens) & {0, 2}


def test_batch_rows_leave_the_cache_as_sentences_finish(make_search_model, random_batch):
    model = make_search_model()
    src = random_batch(0, 40, LENGTHS)
    sizes = []
    original = model.decode

    def recording_decode(tgt_in, *args, **kwargs):
        sizes.append(tgt_in.shape[0])
        return original(tgt_in, *args, **kwargs)

    model.decode = recording_decode
    try:
        beam_search(model, src, beam_size=4, max_len_b=6)
    finally:
        del model.decode
    assert sizes[0] == 4 * len(LENGTHS)
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < sizes[0]
    assert all(size % 4 == 0 for size in sizes)


def test_early_stop_bound_uses_the_longest_reachable_length():
    # one finished hypothesis scoring -1.0; the live beam has log P = -2.0 after 1 token and may
    # grow to 6 tokens: with alpha 2, -2 / lp(2) < -1 < -2 / lp(6), so it can still win
    lp = lambda n: length_penalty(n, 2.0)  # noqa: E731
    finished = [[Hypothesis(tokens=[], score=-1.0, log_prob=-1.0, length=1, finished=True)]]
    live_scores = torch.tensor([[-2.0, float("-inf")]])
    assert -2.0 / lp(2) < -1.0 < -2.0 / lp(6)
    assert _done_sentences(live_scores, [0], finished, [6], 1, 2, 1, lp) == [False]
    # the same live beam when only 2 tokens are allowed can no longer beat -1.0: stop
    assert _done_sentences(live_scores, [0], finished, [2], 1, 2, 1, lp) == [True]
    # two finished hypotheses fill a beam of 2 (rule 1), whatever the live beam could reach
    two = [finished[0] * 2]
    assert _done_sentences(live_scores, [0], two, [6], 1, 2, 1, lp) == [True]
    # with nbest 2 and only one finished hypothesis, the search goes on
    assert _done_sentences(live_scores, [0], finished, [2], 1, 3, 2, lp) == [False]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_gives_the_cpu_results(make_search_model, random_batch):
    model = make_search_model()
    src = random_batch(8, 40, LENGTHS)
    cpu = beam_search(model, src, beam_size=4, nbest=2, max_len_b=6)
    cpu_greedy = greedy_search(model, src, max_len_b=6)
    model.cuda()
    try:
        gpu = beam_search(model, src.cuda(), beam_size=4, nbest=2, max_len_b=6)
        gpu_greedy = greedy_search(model, src.cuda(), max_len_b=6)
    finally:
        model.cpu()
    for a_list, b_list in zip(cpu, gpu, strict=True):
        assert [h.tokens for h in a_list] == [h.tokens for h in b_list]
        for a, b in zip(a_list, b_list, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-4)
    assert [h.tokens for h in cpu_greedy] == [h.tokens for h in gpu_greedy]
