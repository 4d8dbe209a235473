"""Tests for transformer/decode/alignment.py: word alignments from cross-attention.

References: equation 1 of the paper recomputed by hand from the layer's projections (the
attention weights); hand-made pieces and weights (words and hard alignments); the Pharaoh
format spelt out.
"""

from __future__ import annotations

import math

import pytest
import torch

from transformer.decode.alignment import (
    check_layer,
    cross_attention,
    pharaoh,
    word_alignment,
    word_indices,
)
from transformer.decode.translator import Translator


def _equation_1(model, src_row, target, layer):
    """softmax(Q K^T / sqrt(d_k)) of one cross-attention layer, heads averaged, by hand."""
    config = model.config
    src = src_row[src_row.ne(config.pad_id)].unsqueeze(0)  # (1, S)
    attention = model.decoder.layers[layer].cross_attn
    inputs = {}
    hook = attention.register_forward_pre_hook(
        lambda module, args, kwargs: inputs.update(query=args[0] if args else kwargs["query"]),
        with_kwargs=True,
    )
    try:
        with torch.no_grad():
            memory = model.encode(src)
            model.decode(torch.tensor([[config.bos_id, *target]]), memory)
    finally:
        hook.remove()
    H = config.n_heads
    d_k = config.d_model // H
    q = attention.q_proj(inputs["query"]).view(1, -1, H, d_k).transpose(1, 2)  # (1, H, T, Dk)
    k = attention.k_proj(memory).view(1, -1, H, d_k).transpose(1, 2)  # (1, H, S, Dk)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1)  # (1, H, T, S)
    return weights[0].mean(dim=0)[: len(target)]  # (H, T, S) -> (T, S)


@pytest.mark.parametrize("layer", [0, -1])
def test_cross_attention_is_equation_1_averaged_over_heads(make_search_model, random_batch, layer):
    model = make_search_model()
    src = random_batch(0, 40, [5, 2, 4])
    targets = [[7, 8, 9], [], [10, 11, 12, 13, 14]]
    for row, weights in enumerate(cross_attention(model, src, targets, layer)):
        expected = _equation_1(model, src[row], targets[row], layer)
        assert weights.shape == expected.shape
        assert torch.allclose(weights, expected, atol=1e-5)
    pair = cross_attention([model, model], src, targets, layer)
    assert all(
        torch.allclose(a, b, atol=1e-6)
        for a, b in zip(pair, cross_attention(model, src, targets, layer), strict=True)
    )


def test_pieces_map_to_the_words_of_the_text():
    assert word_indices(["\u2581A", "\u2581man", "\u2581ri", "ding", "."]) == [0, 1, 2, 2, 2]
    assert word_indices(["ab", "c", "\u2581d", "\u2581", ","]) == [0, 0, 1, 2, 2]
    assert word_indices([]) == []


def test_each_target_piece_goes_to_its_most_attended_source_word():
    source = ["\u2581Two", "\u2581dog", "s", "\u2581run"]  # words: Two dogs run
    target = ["\u2581Zwei", "\u2581Hunde", "\u2581rennen", "."]  # words: Zwei Hunde rennen.
    weights = torch.tensor(
        [[0.7, 0.1, 0.1, 0.1], [0.1, 0.2, 0.6, 0.1], [0.0, 0.1, 0.0, 0.9], [0.3, 0.3, 0.0, 0.4]]
    )
    pairs = word_alignment(weights, source, target)
    assert pairs == [(0, 0), (1, 1), (2, 2)]  # "." belongs to "rennen." and points at "run"
    assert pharaoh(pairs) == "0-0 1-1 2-2"
    assert word_alignment(torch.zeros(0, 4), source, []) == [] and pharaoh([]) == ""


def test_translator_returns_alignments_of_its_translations(
    translation_model, synthetic_tokenizer, synthetic_sentences
):
    sentences = synthetic_sentences(5, seed=40)
    translator = Translator(translation_model, synthetic_tokenizer)
    found = translator.generate(sentences, alignment=True, beam_size=2, nbest=2, max_len_b=6)
    plain = translator.generate(sentences, beam_size=2, nbest=2, max_len_b=6)
    for sentence, translations, without in zip(sentences, found, plain, strict=True):
        assert [t.tokens for t in translations] == [t.tokens for t in without]
        for t in translations:
            source_words = len(sentence.split())
            target_words = len(t.text.split())
            assert t.alignment == sorted(set(t.alignment))
            assert all(0 <= i < source_words and 0 <= j < target_words for i, j in t.alignment)
            assert {j for _, j in t.alignment} == set(range(target_words))  # every word aligned
    assert without[0].alignment is None
    one_word = translator.generate("man", alignment=True, alignment_layer=0, max_len_b=6)
    assert {i for i, _ in one_word[0].alignment} <= {0}


def test_layers_out_of_range_are_refused(make_search_model):
    model = make_search_model()  # 2 decoder layers
    check_layer(model, -2)
    for layer, message in [
        (2, r"alignment_layer \(2\) is out of range: the decoder has 2"),
        (-3, r"alignment_layer \(-3\) is out of range"),
        (1.0, r"alignment_layer \(1\.0\) must be an integer"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_layer(model, layer)
