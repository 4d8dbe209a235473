"""Tests for transformer/decode/prefix.py: forced target prefixes in every search.

References: a closed form of the forcing itself; a plain greedy loop over full teacher-forced
forwards that starts from the prefix; brute-force enumeration of every output that starts
with the prefix (a 5-token vocabulary); teacher-forced log-probabilities for every score.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from transformer.decode.beam_search import beam_search
from transformer.decode.greedy import greedy_search
from transformer.decode.prefix import NO_TOKEN, PrefixForcing, prefix_lengths
from transformer.decode.sampling import sample_search
from transformer.decode.translator import Translator

LENGTHS = [5, 9, 3, 7]
PREFIXES = [[7, 8, 9], [], [12], [20, 21, 22, 23, 24, 25, 26, 27, 28, 29]]


def test_forcing_keeps_only_the_forced_token_and_its_value():
    log_probs = torch.log_softmax(torch.randn(3, 6, generator=torch.Generator().manual_seed(0)), -1)
    forcing = PrefixForcing([[4, 5], [], [1]], torch.device("cpu"))
    assert forcing.tokens.tolist() == [[4, 5], [NO_TOKEN, NO_TOKEN], [1, NO_TOKEN]]
    out = forcing.apply(log_probs, 0)
    for row, token in [(0, 4), (2, 1)]:
        assert out[row, token] == log_probs[row, token]
        assert out[row].isinf().sum() == 5
    assert torch.equal(out[1], log_probs[1])
    assert torch.equal(forcing.apply(log_probs, 2), log_probs)  # past every prefix
    forcing.reorder(torch.tensor([2, 2, 0]))
    assert forcing.tokens.tolist() == [[1, NO_TOKEN], [1, NO_TOKEN], [4, 5]]
    assert prefix_lengths([3, 10, 8], [[1, 2, 3], [], [1] * 9], cap=9) == [4, 10, 9]


def _greedy_reference(model, src_row, prefix, max_len):
    """Greedy continuation of `prefix` by full forwards (no cache, no padding)."""
    config = model.config
    src = src_row[src_row.ne(config.pad_id)].unsqueeze(0)
    out = list(prefix)
    while len(out) < max_len:
        with torch.no_grad():
            logits = model(src, torch.tensor([[config.bos_id, *out]]))[0, -1].float()
        logits[[config.pad_id, config.bos_id]] = -math.inf
        token = int(logits.argmax())
        if token == config.eos_id:
            return out, True
        out.append(token)
    return out, False


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_continues_the_prefix_as_a_plain_greedy_loop(
    make_search_model, random_batch, teacher_forced_log_prob, use_cache
):
    model = make_search_model()
    src = random_batch(0, 40, LENGTHS)
    hypotheses = greedy_search(model, src, max_len_b=4, prefix=PREFIXES, use_cache=use_cache)
    for row, h in enumerate(hypotheses):
        max_len = max(LENGTHS[row] + 4, len(PREFIXES[row]) + 1)  # raised for the long prefix
        tokens, finished = _greedy_reference(model, src[row], PREFIXES[row], max_len)
        assert (h.tokens, h.finished) == (tokens, finished)
        assert h.tokens[: len(PREFIXES[row])] == PREFIXES[row]
        log_prob, _ = teacher_forced_log_prob(model, src[row], h.tokens, h.finished)
        assert h.log_prob == pytest.approx(log_prob, rel=1e-6, abs=1e-5)


def test_wide_beam_finds_the_brute_force_optimum_among_outputs_with_the_prefix(
    make_search_model, random_batch, teacher_forced_log_prob
):
    model = make_search_model(vocab_size=5, eos_boost=1.0)  # emits unk (1), eos (3) and 4
    src = random_batch(6, 5, [3, 1])
    prefix, max_len = [[4, 1], [1]], 5
    results = beam_search(
        model, src, beam_size=64, nbest=3, max_len_a=0.0, max_len_b=max_len, prefix=prefix
    )
    for row, hypotheses in enumerate(results):
        scored = []
        for n in range(len(prefix[row]), max_len + 1):  # n output tokens, eos not counted
            for rest in itertools.product([1, 4], repeat=n - len(prefix[row])):
                tokens, finished = prefix[row] + list(rest), n < max_len  # else cut at the max
                log_prob, _ = teacher_forced_log_prob(model, src[row], tokens, finished)
                score = log_prob / ((5 + n + finished) / 6) ** 0.6
                scored.append((score, tokens, finished))
        scored.sort(key=lambda entry: entry[0], reverse=True)
        assert [(h.tokens, h.finished) for h in hypotheses] == [(t, f) for _, t, f in scored[:3]]
        for h, (score, _, _) in zip(hypotheses, scored, strict=False):
            assert h.score == pytest.approx(score, abs=1e-5)


def test_one_beam_with_a_prefix_is_greedy_with_it(make_search_model, random_batch):
    model = make_search_model()
    src = random_batch(1, 40, LENGTHS)
    greedy = greedy_search(model, src, max_len_b=4, prefix=PREFIXES)
    beam = beam_search(model, src, beam_size=1, max_len_b=4, prefix=PREFIXES)
    assert [[h] for h in greedy] == beam


def test_samples_start_with_the_prefix(make_search_model, random_batch):
    model = make_search_model()
    src = random_batch(2, 40, LENGTHS)
    for row, samples in enumerate(
        sample_search(model, src, range(4), num_samples=3, max_len_b=4, prefix=PREFIXES)
    ):
        assert all(h.tokens[: len(PREFIXES[row])] == PREFIXES[row] for h in samples)


def test_translator_outputs_start_with_each_sentences_prefix(
    translation_model, synthetic_tokenizer, synthetic_sentences
):
    sentences = synthetic_sentences(4, seed=12)
    prefixes = ["a man", "", "the big", "a"]
    translator = Translator(translation_model, synthetic_tokenizer)
    for greedy in (True, False):
        outputs = translator.generate(sentences, prefix=prefixes, greedy=greedy, max_len_b=6)
        for found, text in zip(outputs, prefixes, strict=True):
            ids = synthetic_tokenizer.encode_target(text)
            assert found[0].tokens[: len(ids)] == ids
            assert found[0].text.startswith(text)
    one = translator.translate(sentences[0], prefix="a man", max_len_b=6)
    assert one == translator.translate(sentences, prefix=prefixes, max_len_b=6)[0]
    assert translator.translate(["", sentences[0]], prefix=["a", "b"], max_len_b=6)[0] == ""
    too_long = " ".join(["man"] * translation_model.config.max_positions)
    with pytest.raises(ValueError, match=r"^prefix\[1\] has \d+ tokens; the model decodes at most"):
        translator.translate(sentences[:2], prefix=["", too_long])
    with pytest.raises(ValueError, match=r"^prefix of a single sentence must be a string"):
        translator.translate(sentences[0], prefix=["a"])
