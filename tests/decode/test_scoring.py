"""Tests for transformer/decode/scoring.py (and `Translator.score`, which batches it).

References: one unpadded teacher-forced forward per pair (the `teacher_forced_log_prob`
fixture); the n-best scores of beam search; closed forms of the length penalty.
"""

from __future__ import annotations

import pytest
import torch

from transformer.decode.beam_search import beam_search
from transformer.decode.scoring import Score, padded, score_batch
from transformer.decode.translator import Translator

LENGTHS = [5, 9, 3, 7]


def test_score_batch_equals_one_forward_per_pair(
    make_search_model, random_batch, teacher_forced_log_prob
):
    model = make_search_model()
    src = random_batch(0, 40, LENGTHS)
    generator = torch.Generator().manual_seed(1)
    targets = [torch.randint(4, 40, (n,), generator=generator).tolist() for n in (6, 0, 11, 2)]
    for row, log_prob in enumerate(score_batch(model, src, targets)):
        expected, _ = teacher_forced_log_prob(model, src[row], targets[row], True)
        assert log_prob == pytest.approx(expected, abs=1e-5)


def test_the_score_of_a_beam_hypothesis_is_its_nbest_score(
    make_search_model, random_batch, teacher_forced_log_prob
):
    model = make_search_model()
    src = random_batch(1, 40, LENGTHS)
    found = beam_search(model, src, beam_size=4, nbest=4, max_len_b=6)
    rows = [row for row, hypotheses in enumerate(found) for h in hypotheses if h.finished]
    hyps = [h for hypotheses in found for h in hypotheses if h.finished]
    assert len(hyps) > 4
    scored = score_batch(model, src[rows], [h.tokens for h in hyps])
    for h, log_prob in zip(hyps, scored, strict=True):
        assert log_prob == pytest.approx(h.log_prob, abs=1e-5)


class WordTokenizer:
    """Ids as words ("w5 w9" <-> [5, 9]), so that every output's text gives back its ids."""

    def encode_batch(self, texts):
        return [[int(word[1:]) for word in text.split()] for text in texts]

    encode_target_batch = encode_batch

    def decode(self, ids):
        return " ".join(f"w{i}" for i in ids)


def test_translator_score_of_each_nbest_translation_is_its_nbest_score(
    make_search_model, random_batch
):
    model = make_search_model()
    src = random_batch(2, 40, [5, 9, 3, 7, 4, 6])
    sentences = [" ".join(f"w{i}" for i in row if i) for row in src.tolist()]
    translator = Translator(model, WordTokenizer())
    nbest = translator.generate(sentences, beam_size=3, nbest=3, max_len_b=6)
    pairs = [(s, t) for s, found in zip(sentences, nbest, strict=True) for t in found if t.finished]
    assert len(pairs) >= 6
    for max_tokens in (4096, 12):  # one batch, or many
        sources, targets = [s for s, _ in pairs], [t.text for _, t in pairs]
        scores = translator.score(sources, targets, max_tokens=max_tokens)
        for score, (_, t) in zip(scores, pairs, strict=True):
            assert score.log_prob == pytest.approx(t.log_prob, abs=1e-5)
            assert score.score == pytest.approx(t.score, abs=1e-5)
            assert score.length == len(t.tokens) + 1
            assert score.per_token == pytest.approx(score.log_prob / score.length)


def test_translator_score_is_the_teacher_forced_log_prob_and_the_length_penalty(
    translation_model, synthetic_tokenizer, synthetic_sentences, teacher_forced_log_prob
):
    sources, targets = synthetic_sentences(5, seed=20), synthetic_sentences(5, seed=21)
    translator = Translator(translation_model, synthetic_tokenizer)
    scores = translator.score(sources, targets, max_tokens=10)
    for source, target, score in zip(sources, targets, scores, strict=True):
        src = torch.tensor(synthetic_tokenizer.encode(source))
        ids = synthetic_tokenizer.encode_target(target)
        expected, _ = teacher_forced_log_prob(translation_model, src, ids, True)
        assert score.log_prob == pytest.approx(expected, abs=1e-5)
        assert score.score == pytest.approx(expected / ((5 + len(ids) + 1) / 6) ** 0.6, abs=1e-5)
    one = translator.score(sources[0], targets[0], length_penalty=1.0, length_penalty_style="power")
    assert isinstance(one, Score)
    assert one.score == pytest.approx(one.log_prob / one.length)  # |Y| ** 1
    assert translator.score(sources[0], targets[0], length_penalty=0.0).score == one.log_prob


def test_score_errors_are_one_line(translation_model, synthetic_tokenizer):
    translator = Translator(translation_model, synthetic_tokenizer)
    with pytest.raises(
        ValueError, match=r"^sources and targets must pair up: 2 sources, 1 targets$"
    ):
        translator.score(["a man .", "a dog ."], ["a"])
    with pytest.raises(ValueError, match=r"^sources and targets must pair up"):
        translator.score("a man .", ["a"])
    with pytest.raises(ValueError, match=r"^sources\[1\] has no tokens"):
        translator.score(["a man .", "  "], ["a", "b"])
    with pytest.raises(ValueError, match=r"^unknown option 'beam_size'; this call takes length_"):
        translator.score(["a man ."], ["a"], beam_size=2)
    with pytest.raises(ValueError, match=r"max_tokens \(0\) must be at least 1"):
        translator.score(["a man ."], ["a"], max_tokens=0)
    assert translator.score([], []) == []


def test_padded_rows():
    assert padded([[5, 6], [], [7]], 0, torch.device("cpu")).tolist() == [[5, 6], [0, 0], [7, 0]]
    assert padded([], 0, torch.device("cpu")).shape == (0, 1)
