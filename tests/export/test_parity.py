"""Tests for transformer/export/parity.py: our decoder's reference ids, the teacher-forced batch
and the report line."""

from __future__ import annotations

import torch

from transformer.decode.translator import Translator
from transformer.export.parity import (
    CHECK_SENTENCES,
    ParityResult,
    decode_ids,
    identical_share_passes,
    teacher_forced_logits,
)


def test_report_line_says_what_was_compared_and_the_verdict():
    ok = ParityResult(
        "ctranslate2 float32, greedy", 8, 8, 1.5e-6, "log-prob", True, "identical >= 99%"
    )
    assert ok.line() == (
        "ctranslate2 float32, greedy: 8 sentences, 8 identical (100.0%), "
        "max log-prob difference 1.50e-06: ok (identical >= 99%)"
    )
    bad = ParityResult("x", 1000, 950, None, "", False, "identical >= 99%", note="BLEU 1 vs 2")
    assert (
        bad.line()
        == "x: 1000 sentences, 950 identical (95.0%), BLEU 1 vs 2: MISMATCH (identical >= 99%)"
    )


def test_identical_share():
    assert identical_share_passes(99, 100, 0.99) and not identical_share_passes(98, 100, 0.99)
    assert identical_share_passes(8, 8, 0.99) and not identical_share_passes(7, 8, 0.99)
    assert identical_share_passes(0, 8, 0.0)


def test_check_sentences_are_english_and_german():
    assert len(CHECK_SENTENCES) >= 8 and all(CHECK_SENTENCES)
    assert any("Hund" in s for s in CHECK_SENTENCES) and any("horse" in s for s in CHECK_SENTENCES)


def test_decode_ids_are_the_translators_outputs(
    translation_model, synthetic_tokenizer, synthetic_sentences
):
    sentences = synthetic_sentences(30, seed=4)
    sources = synthetic_tokenizer.encode_batch(sentences)
    translator = Translator(translation_model, synthetic_tokenizer, linear_kernel="torch")
    for beam_size in (1, 4):
        ids = decode_ids(translation_model.eval(), sources, beam_size, 0.6, "power", max_len_b=8)
        texts = translator.translate(
            sentences, beam_size=4, greedy=beam_size == 1, length_penalty_style="power", max_len_b=8
        )
        assert synthetic_tokenizer.decode_batch(ids) == texts


def test_teacher_forced_batch_is_padded_and_matches_unpadded_forwards(make_model):
    model = make_model(40, dropout=0.0)
    sources, targets = [[5, 6, 7], [8], [9, 10]], [[11, 12], [13, 14, 15, 16], []]
    src, tgt_in, mask, logits = teacher_forced_logits(model, sources, targets)
    assert src.shape == (3, 3) and tgt_in.shape == (3, 5) and logits.shape == (3, 5, 40)
    assert tgt_in[:, 0].tolist() == [2, 2, 2] and mask.sum(1).tolist() == [3, 5, 1]
    for row, (source, target) in enumerate(zip(sources, targets, strict=True)):
        with torch.no_grad():
            alone = model(torch.tensor([source]), torch.tensor([[2, *target]]))[0]
        torch.testing.assert_close(logits[row, : len(target) + 1], alone, atol=1e-5, rtol=1e-5)
