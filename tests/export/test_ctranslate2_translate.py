"""Tests for transformer/export/ctranslate2_translate.py: CTranslate2 options that reproduce our
searches, checked against our own greedy and beam search on the same weights."""

from __future__ import annotations

import pytest
import torch

ctranslate2 = pytest.importorskip("ctranslate2")

from transformer.export.ctranslate2 import export_ctranslate2  # noqa: E402
from transformer.export.ctranslate2_translate import decoding_options, translate_ids  # noqa: E402
from transformer.export.parity import decode_ids  # noqa: E402


def steered(model, sign: float):
    """`model` with constant decoder output +-5 E[eos] (the last LayerNorm's gain 0, its bias
    that vector): eos always has the largest logit (sign +1) or never (sign -1)."""
    with torch.no_grad():
        norm = model.decoder.layers[-1].norm3
        norm.weight.zero_()
        norm.bias.copy_(sign * 5.0 * model.tgt_embed.weight[model.config.eos_id])
    return model


def exported(model, tokenizer, directory):
    export_ctranslate2(model, tokenizer, directory)
    return ctranslate2.Translator(str(directory), compute_type="float32", intra_threads=1)


@pytest.fixture
def sources(synthetic_sentences, synthetic_tokenizer):
    return synthetic_tokenizer.encode_batch(synthetic_sentences(16, seed=5))


def test_options_are_our_conventions():
    options = decoding_options(beam_size=4, length_penalty=0.6)
    assert options["min_decoding_length"] == 0 and options["return_end_token"] is True
    assert options["length_penalty"] == 0.6 and options["beam_size"] == 4
    assert options["max_input_length"] == 0 and options["patience"] == 1


def test_an_immediate_eos_is_an_empty_translation_not_one_token(
    make_search_model, synthetic_tokenizer, sources, tmp_path
):
    model = steered(make_search_model(synthetic_tokenizer.vocab_size, eos_boost=3.0), +1.0)
    translator = exported(model, synthetic_tokenizer, tmp_path / "ct2")
    assert decode_ids(model, sources, beam_size=1) == [[]] * len(sources)
    assert translate_ids(translator, synthetic_tokenizer, sources, 1) == [[]] * len(sources)
    # CTranslate2's default minimum length of 1 would have forced a token first.
    pieces = [synthetic_tokenizer.source_pieces(ids) for ids in sources[:2]]
    default = translator.translate_batch(pieces, beam_size=1)
    assert all(len(result.hypotheses[0]) == 1 for result in default)


def test_each_sentence_keeps_its_own_length_limit(
    make_search_model, synthetic_tokenizer, sources, tmp_path
):
    model = steered(make_search_model(synthetic_tokenizer.vocab_size), -1.0)  # never eos
    translator = exported(model, synthetic_tokenizer, tmp_path / "ct2")
    limits = dict(max_len_a=0.5, max_len_b=2)
    ours = decode_ids(model, sources, beam_size=1, **limits)
    theirs = translate_ids(translator, synthetic_tokenizer, sources, 1, **limits)
    assert theirs == ours
    assert [len(ids) for ids in theirs] == [int(0.5 * len(ids) + 2) for ids in sources]
    assert len({len(ids) for ids in theirs}) > 2  # several limits in one call
    capped = translate_ids(translator, synthetic_tokenizer, sources, 1, max_positions=3)
    assert {len(ids) for ids in capped} == {3}


def test_the_beam_score_counts_the_final_eos_in_the_power_length_penalty(
    trained, test_sentences, tmp_path
):
    """CTranslate2's score with `return_end_token` is log P / |Y|^alpha with |Y| = tokens + 1
    (the final eos), as our `length_penalty_style: power`; log P renormalised without <pad>
    and <s>, which the export bans."""
    model, tokenizer, _ = trained
    translator = exported(model, tokenizer, tmp_path / "ct2")
    sources = tokenizer.encode_batch(test_sentences(12))
    options = decoding_options(beam_size=4, length_penalty=1.0)
    results = translator.translate_batch(
        [tokenizer.source_pieces(ids) for ids in sources],
        max_decoding_length=60,
        return_scores=True,
        **options,
    )
    vocabulary = tokenizer.target_pieces(range(tokenizer.tgt_vocab_size))
    finished = 0
    for ids, result in zip(sources, results, strict=True):
        hypothesis = result.hypotheses[0]
        if hypothesis[-1:] != ["</s>"]:
            continue
        tokens = [vocabulary.index(piece) for piece in hypothesis]
        tgt_in = torch.tensor([[model.config.bos_id, *tokens[:-1]]])
        with torch.no_grad():
            logits = model(torch.tensor([ids]), tgt_in)[0]  # (T, V)
        logits[:, [model.config.pad_id, model.config.bos_id]] = float("-inf")
        log_prob = torch.log_softmax(logits, -1)[torch.arange(len(tokens)), tokens].sum()
        assert result.scores[0] == pytest.approx(log_prob.item() / len(tokens), abs=1e-4)
        finished += 1
    assert finished >= 8


def test_an_empty_source_is_refused(make_search_model, synthetic_tokenizer, tmp_path):
    model = make_search_model(synthetic_tokenizer.vocab_size)
    translator = exported(model, synthetic_tokenizer, tmp_path / "ct2")
    with pytest.raises(ValueError, match="non-empty"):
        translate_ids(translator, synthetic_tokenizer, [[5, 6], []])
