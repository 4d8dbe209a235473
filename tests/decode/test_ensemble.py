"""Tests for transformer/decode/ensemble.py: several models decoding together.

References: the closed form log((p1 + p2) / 2); the members' full teacher-forced forwards
(softmax, averaged by hand); an ensemble of a model with itself is that model.
"""

from __future__ import annotations

import math

import pytest
import torch

from transformer.decode.beam_search import beam_search
from transformer.decode.ensemble import (
    as_models,
    check_vocabularies,
    load_ensemble,
    mean_probability,
)
from transformer.decode.greedy import greedy_search
from transformer.decode.sampling import sample_search
from transformer.decode.scoring import score_batch
from transformer.decode.translator import Translator

LENGTHS = [5, 9, 3, 7]


def test_mean_probability_closed_form():
    p1, p2 = torch.tensor([[0.2, 0.8]]), torch.tensor([[0.6, 0.4]])
    mean = mean_probability([p1.log(), p2.log()])
    assert mean.exp().tolist()[0] == pytest.approx([0.4, 0.6])
    one = p1.log()
    assert mean_probability([one]) is one
    assert as_models(one) == [one] and as_models([one, one]) == [one, one]


def test_an_ensemble_of_a_model_with_itself_is_that_model(make_search_model, random_batch):
    model = make_search_model()
    src = random_batch(0, 40, LENGTHS)
    pair = [model, model]
    for alone, together in [
        (greedy_search(model, src, max_len_b=6), greedy_search(pair, src, max_len_b=6)),
        (
            beam_search(model, src, beam_size=3, nbest=2, max_len_b=6),
            beam_search(pair, src, beam_size=3, nbest=2, max_len_b=6),
        ),
        (
            sample_search(model, src, range(4), num_samples=2, max_len_b=6),
            sample_search(pair, src, range(4), num_samples=2, max_len_b=6),
        ),
    ]:
        flat = [h for hs in alone for h in (hs if isinstance(hs, list) else [hs])]
        flat_pair = [h for hs in together for h in (hs if isinstance(hs, list) else [hs])]
        assert [h.tokens for h in flat] == [h.tokens for h in flat_pair]
        assert [h.score for h in flat] == pytest.approx([h.score for h in flat_pair], abs=1e-5)


def test_two_models_decode_with_their_mean_probability(
    make_search_model, random_batch, teacher_forced_log_prob
):
    first, second = make_search_model(seed=0), make_search_model(seed=1)
    src = random_batch(1, 40, LENGTHS)
    found = beam_search([first, second], src, beam_size=3, nbest=3, max_len_b=6)
    greedy = greedy_search([first, second], src, max_len_b=6)
    for row, hypotheses in enumerate(found):
        for h in [*hypotheses, greedy[row]]:
            target = h.tokens + ([3] if h.finished else [])
            _, a = teacher_forced_log_prob(first, src[row], h.tokens, h.finished)
            _, b = teacher_forced_log_prob(second, src[row], h.tokens, h.finished)
            mean = [math.log((a[t, y].exp() + b[t, y].exp()) / 2) for t, y in enumerate(target)]
            assert h.log_prob == pytest.approx(sum(mean), abs=1e-5)
    rows = [row for row, h in enumerate(greedy) if h.finished]
    assert rows
    scored = score_batch([first, second], src[rows], [greedy[row].tokens for row in rows])
    assert scored == pytest.approx([greedy[row].log_prob for row in rows], abs=1e-5)


def test_members_must_share_the_vocabulary(make_search_model):
    with pytest.raises(ValueError, match=r"^model 1 does not share the vocabulary of model 0: "):
        check_vocabularies([make_search_model(40), make_search_model(41)])
    with pytest.raises(ValueError, match=r"eos_id is 4, not 3$"):
        check_vocabularies([make_search_model(40), make_search_model(40, eos_id=4)])
    with pytest.raises(ValueError, match="at least one model"):
        check_vocabularies([])


def test_from_checkpoints_loads_an_ensemble_and_refuses_another_vocabulary(
    tmp_path,
    translation_model,
    synthetic_tokenizer,
    tiny_tokenizer,
    make_search_model,
    write_checkpoint,
    synthetic_sentences,
):
    a = write_checkpoint(tmp_path / "a.pt", translation_model, synthetic_tokenizer)
    other = make_search_model(synthetic_tokenizer.vocab_size, seed=3)
    b = write_checkpoint(tmp_path / "b.pt", other, synthetic_tokenizer)
    ensemble = Translator.from_checkpoints([a, b])
    assert len(ensemble.models) == 2
    sentences = synthetic_sentences(3, seed=30)
    expected = Translator([translation_model, other], synthetic_tokenizer).translate(
        sentences, beam_size=2, max_len_b=4
    )
    assert ensemble.translate(sentences, beam_size=2, max_len_b=4) == expected
    # A copy is another file and may join; the same file again (its name or a hard link, as a
    # run's checkpoint_last.pt is of its newest numbered checkpoint) may not.
    copy = tmp_path / "copy.pt"
    copy.write_bytes(a.read_bytes())
    same = Translator.from_checkpoints([a, copy]).translate(sentences, beam_size=2, max_len_b=4)
    assert same == Translator.from_checkpoint(a).translate(sentences, beam_size=2, max_len_b=4)
    link = tmp_path / "link.pt"
    link.hardlink_to(a)
    for repeat in (a, link):
        message = rf"^{repeat} is the same file as {a}: an ensemble's members must be different"
        with pytest.raises(ValueError, match=message):
            load_ensemble([a, b, repeat])

    foreign = make_search_model(synthetic_tokenizer.vocab_size)
    c = write_checkpoint(tmp_path / "c.pt", foreign, tiny_tokenizer)  # same size, other pieces
    message = rf"^{c} does not share the vocabulary of {a}: their SentencePiece models differ$"
    with pytest.raises(ValueError, match=message):
        load_ensemble([a, c])
    with pytest.raises(ValueError, match=r"^from_checkpoints takes a list of paths"):
        Translator.from_checkpoints(str(a))
    with pytest.raises(ValueError, match="at least one checkpoint"):
        load_ensemble([])
