"""Tests for transformer/decode/translator.py: batching, order, empty lines, checkpoints.

The reference for every translation is the search function called directly on one sentence's
ids, decoded by the synthetic_tokenizer.
"""

from __future__ import annotations

import pytest
import torch

from transformer.cpu import onednn
from transformer.decode.beam_search import beam_search
from transformer.decode.greedy import greedy_search
from transformer.decode.translator import Translator


def reference_translation(model, tokenizer, sentence, **settings) -> list[tuple[str, float]]:
    """Beam search on one sentence alone, without the Translator."""
    src = torch.tensor([tokenizer.encode(sentence)])
    with torch.no_grad():
        hypotheses = beam_search(model, src, **settings)[0]
    return [(tokenizer.decode(h.tokens), h.score) for h in hypotheses]


def test_translate_equals_each_sentence_alone_in_input_order(
    translation_model, synthetic_tokenizer, synthetic_sentences
):
    sentences = synthetic_sentences(12, seed=1)
    translator = Translator(translation_model, synthetic_tokenizer)
    small = translator.translate(sentences, beam_size=3, max_tokens=10, max_len_b=8)
    large = translator.translate(sentences, beam_size=3, max_tokens=4096, max_len_b=8)
    expected = [
        reference_translation(translation_model, synthetic_tokenizer, s, beam_size=3, max_len_b=8)[
            0
        ][0]
        for s in sentences
    ]
    assert small == expected
    assert large == expected
    assert len(set(expected)) > 1


def test_greedy_flag_uses_greedy_search(
    translation_model, synthetic_tokenizer, synthetic_sentences
):
    sentences = synthetic_sentences(5, seed=2)
    translator = Translator(translation_model, synthetic_tokenizer)
    outputs = translator.translate(sentences, greedy=True, beam_size=7, max_len_b=8)
    for sentence, output in zip(sentences, outputs, strict=True):
        src = torch.tensor([synthetic_tokenizer.encode(sentence)])
        (h,) = greedy_search(translation_model, src, max_len_b=8)
        assert output == synthetic_tokenizer.decode(h.tokens)


def test_empty_lines_give_empty_output_and_leave_neighbours_alone(
    translation_model, synthetic_tokenizer, synthetic_sentences
):
    sentences = synthetic_sentences(6, seed=3)
    translator = Translator(translation_model, synthetic_tokenizer)
    plain = translator.translate(sentences, max_tokens=16, max_len_b=8)
    with_blanks = ["", sentences[0], "   ", sentences[1], "\t"] + sentences[2:] + [""]
    outputs = translator.translate(with_blanks, max_tokens=16, max_len_b=8)
    assert outputs == ["", plain[0], "", plain[1], ""] + plain[2:] + [""]
    assert translator.translate([]) == []
    nbest = translator.translate_nbest(["", sentences[0]], beam_size=3, nbest=2, max_len_b=8)
    assert nbest[0] == [("", 0.0)]
    assert len(nbest[1]) == 2


def test_translate_nbest_matches_beam_search_scores(
    translation_model, synthetic_tokenizer, synthetic_sentences
):
    sentences = synthetic_sentences(4, seed=4)
    translator = Translator(translation_model, synthetic_tokenizer)
    nbest = translator.translate_nbest(sentences, beam_size=4, nbest=3, max_len_b=8)
    for sentence, entries in zip(sentences, nbest, strict=True):
        expected = reference_translation(
            translation_model, synthetic_tokenizer, sentence, beam_size=4, nbest=3, max_len_b=8
        )
        assert [text for text, _ in entries] == [text for text, _ in expected]
        for (_, score), (_, reference) in zip(entries, expected, strict=True):
            assert score == pytest.approx(reference, abs=1e-5)
    with pytest.raises(ValueError, match="nbest"):
        translator.translate_nbest(sentences, beam_size=2, nbest=3)


def test_translate_uses_eval_mode_and_restores_training_mode(
    translation_model, synthetic_tokenizer, synthetic_sentences
):
    sentences = synthetic_sentences(4, seed=5)
    translator = Translator(translation_model, synthetic_tokenizer)
    expected = translator.translate(sentences, max_len_b=8)
    translation_model.train()
    try:
        assert translator.translate(sentences, max_len_b=8) == expected  # dropout is off
        assert translation_model.training
    finally:
        translation_model.eval()


def test_from_checkpoint_round_trip_and_errors(
    translation_model, synthetic_tokenizer, tmp_path, synthetic_sentences, write_checkpoint
):
    path = tmp_path / "checkpoint.pt"
    write_checkpoint(path, translation_model, synthetic_tokenizer)
    sentences = synthetic_sentences(5, seed=6)
    loaded = Translator.from_checkpoint(path)
    assert loaded.translate(sentences, max_len_b=8) == Translator(
        translation_model, synthetic_tokenizer
    ).translate(sentences, max_len_b=8)
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        Translator.from_checkpoint(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match="junk.pt"):
        Translator.from_checkpoint(tmp_path / "junk.pt")
    single = loaded.translate(sentences[0], max_len_b=8)  # a string in, a string out
    assert isinstance(single, str)
    assert single == loaded.translate(sentences[:1], max_len_b=8)[0]


def test_a_tuple_translates_like_the_list(
    translation_model, synthetic_tokenizer, synthetic_sentences
):
    sentences = synthetic_sentences(4, seed=3)
    translator = Translator(translation_model, synthetic_tokenizer)
    expected = translator.translate(sentences, beam_size=2, max_len_b=8)
    assert translator.translate(tuple(sentences), beam_size=2, max_len_b=8) == expected


@pytest.mark.parametrize("dtype, name", [(torch.bfloat16, "bf16"), (torch.float16, "fp16")])
def test_translator_refuses_onednn_for_a_half_precision_model(
    monkeypatch, tiny_model, tiny_tokenizer, dtype, name
):
    monkeypatch.setattr(onednn, "onednn_available", lambda: True)  # refused for the dtype alone
    model = tiny_model.to(dtype)
    with pytest.raises(ValueError, match=rf"^linear kernel 'onednn' .* runs in {name} on cpu"):
        Translator(model, tiny_tokenizer, linear_kernel="onednn")
    monkeypatch.setattr(onednn, "x86_64", lambda: True)
    assert not Translator(model, tiny_tokenizer).onednn  # "auto" leaves it to torch
    assert Translator(tiny_model.float(), tiny_tokenizer, linear_kernel="onednn").onednn


@pytest.mark.parametrize("greedy, beams", [(True, 1), (False, 3)])
def test_weights_are_packed_for_the_rows_a_step_decodes(
    translation_model, synthetic_tokenizer, synthetic_sentences, monkeypatch, greedy, beams
):
    """rows = sentences of the largest batch x beams (the rows of one decoding step)."""
    from transformer.decode import batched

    seen = []
    real = batched.prepacked_weights

    def spy(model, rows=None):
        seen.append(rows)
        return real(model, rows)

    monkeypatch.setattr(batched, "prepacked_weights", spy)
    sentences = synthetic_sentences(5, seed=3)
    lengths = [len(ids) for ids in synthetic_tokenizer.encode_batch(sentences)]
    max_tokens = 2 * max(lengths)
    batches = batched.length_sorted_batches(lengths, max_tokens)
    translator = Translator(translation_model, synthetic_tokenizer)
    translator.translate(sentences, beam_size=3, greedy=greedy, max_tokens=max_tokens)
    assert seen == [max(len(batch) for batch in batches) * beams]


def test_the_checkpoints_decode_section_is_the_default_and_an_argument_overrides_it(
    translation_model, synthetic_tokenizer, synthetic_sentences, tmp_path, write_checkpoint
):
    """Item 7 of issue #16: `decode.max_len_b: 3` in the checkpoint decodes with b = 3."""
    from transformer.config import Config, DecodeConfig, config_to_dict

    section = DecodeConfig(beam_size=2, length_penalty=1.0, max_len_b=3)
    config = config_to_dict(Config(model=translation_model.config, decode=section))
    path = write_checkpoint(
        tmp_path / "c.pt", translation_model, synthetic_tokenizer, config=config
    )
    loaded = Translator.from_checkpoint(path)
    assert loaded.decode == section
    sentences = synthetic_sentences(6, seed=7)

    def reference(**settings):
        return [
            reference_translation(translation_model, synthetic_tokenizer, s, **settings)[0][0]
            for s in sentences
        ]

    assert loaded.translate(sentences) == reference(beam_size=2, length_penalty=1.0, max_len_b=3)
    found = loaded.generate(sentences)  # b = 3, not the paper's 50: outputs are cut there
    lengths = [len(ids) for ids in synthetic_tokenizer.encode_batch(sentences)]
    assert all(len(t.tokens) <= n + 3 for (t,), n in zip(found, lengths, strict=True))
    assert any(
        not t.finished and len(t.tokens) == n + 3 for (t,), n in zip(found, lengths, strict=True)
    )
    overridden = reference(beam_size=2, length_penalty=1.0, max_len_b=5)
    assert loaded.translate(sentences, max_len_b=5) == overridden
    assert [len(entries) for entries in loaded.translate_nbest(sentences)] == [2] * 6
    src = torch.tensor([synthetic_tokenizer.encode(sentences[0])])
    (greedy,) = greedy_search(translation_model, src, max_len_b=3)
    assert loaded.translate(sentences[0], greedy=True) == synthetic_tokenizer.decode(greedy.tokens)
    assert Translator(translation_model, synthetic_tokenizer).decode == DecodeConfig()


def test_a_single_string_gives_a_single_result_and_the_translator_is_callable(
    translation_model, synthetic_tokenizer, synthetic_sentences
):
    """Item 8 of issue #16, as `pipeline` users expect."""
    sentences = synthetic_sentences(3, seed=8)
    translator = Translator(translation_model, synthetic_tokenizer)
    listed = translator.translate(sentences, beam_size=2, max_len_b=8)
    assert translator(sentences, beam_size=2, max_len_b=8) == listed
    assert translator(sentences[1], beam_size=2, max_len_b=8) == listed[1]
    assert translator("", beam_size=2) == ""
    nbest = translator.translate_nbest(sentences[1], beam_size=2, nbest=2, max_len_b=8)
    batched = translator.translate_nbest(sentences, beam_size=2, max_len_b=8)[1]
    assert [text for text, _ in nbest] == [text for text, _ in batched]
    assert [score for _, score in nbest] == pytest.approx([score for _, score in batched], abs=1e-5)
    (best,) = translator.generate(sentences[1], beam_size=2, max_len_b=8)
    assert (best.text, best.score) == nbest[0]  # the same call on the same batch
