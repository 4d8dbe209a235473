"""Tests for transformer/evaluate/bleu.py against sacreBLEU called directly and hand-made
tokenizations."""

from __future__ import annotations

import pytest
import sacrebleu

from transformer.evaluate.bleu import (
    corpus_scores,
    format_scores,
    split_compounds,
    tokenize_for_paper_bleu,
)

HYPS = [
    "Ein Mann isst einen Apfel.",
    "Zwei Hunde spielen im Schnee-Feld.",
    "Die Hochzeits-Party war ein Riesen-Erfolg!",
    "",
]
REFS = [
    "Ein Mann isst einen roten Apfel.",
    "Zwei Hunde spielen im Schnee.",
    "Die Hochzeits-Feier war ein Riesen-Erfolg!",
    "Eine Frau liest.",
]
REFS_2 = [
    "Ein Mann isst einen Apfel.",
    "Zwei Hunde toben im Schnee-Feld.",
    "Die Hochzeit war ein großer Erfolg!",
    "Eine Frau liest ein Buch.",
]


def test_bleu_and_chrf_equal_sacrebleu_called_directly():
    scores = corpus_scores(HYPS, REFS, target_lang="de")
    bleu = sacrebleu.corpus_bleu(HYPS, [REFS])
    chrf = sacrebleu.corpus_chrf(HYPS, [REFS])
    assert scores["bleu"] == pytest.approx(bleu.score, abs=1e-9)
    assert scores["chrf"] == pytest.approx(chrf.score, abs=1e-9)
    assert scores["bleu_bp"] == pytest.approx(bleu.bp)
    assert scores["bleu_sys_len"] == bleu.sys_len and scores["bleu_ref_len"] == bleu.ref_len
    assert scores["n_segments"] == 4
    assert "nrefs:1" in scores["signatures"]["bleu"]
    assert "tok:13a" in scores["signatures"]["bleu"]
    assert "nc:6" in scores["signatures"]["chrf"]
    assert scores["signatures"]["tokenized_bleu"].endswith(
        "tok:none|smooth:exp|version:" + sacrebleu.__version__ + "|pretok:13a+compound-split"
    )


def test_several_reference_streams():
    scores = corpus_scores(HYPS, [REFS, REFS_2])
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS, REFS_2]).score)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS, REFS_2]).score)
    assert "nrefs:2" in scores["signatures"]["bleu"]


def test_compound_split_by_hand():
    assert split_compounds("Riesen-Erfolg") == "Riesen ##AT##-##AT## Erfolg"
    assert (
        split_compounds("Hochzeits-Party-Test")
        == "Hochzeits ##AT##-##AT## Party ##AT##-##AT## Test"
    )
    # the reference Perl one-liner matches left to right without overlap: "b" is consumed
    assert split_compounds("a-b-c") == "a ##AT##-##AT## b-c"
    assert split_compounds("ein - Strich") == "ein - Strich"  # a free-standing dash stays
    assert (
        tokenize_for_paper_bleu("Die Hochzeits-Party war ein Riesen-Erfolg, 3-4 Tage!")
        == "Die Hochzeits ##AT##-##AT## Party war ein Riesen ##AT##-##AT## Erfolg , 3 - 4 Tage !"
    )


def test_tokenized_bleu_equals_bleu_on_hand_tokenized_text():
    hand_hyps = [
        "Ein Mann isst einen Apfel .",
        "Zwei Hunde spielen im Schnee ##AT##-##AT## Feld .",
        "Die Hochzeits ##AT##-##AT## Party war ein Riesen ##AT##-##AT## Erfolg !",
        "",
    ]
    hand_refs = [
        "Ein Mann isst einen roten Apfel .",
        "Zwei Hunde spielen im Schnee .",
        "Die Hochzeits ##AT##-##AT## Feier war ein Riesen ##AT##-##AT## Erfolg !",
        "Eine Frau liest .",
    ]
    expected = sacrebleu.corpus_bleu(hand_hyps, [hand_refs], tokenize="none").score
    assert corpus_scores(HYPS, REFS)["tokenized_bleu"] == pytest.approx(expected, abs=1e-9)
    # splitting compounds makes a partly right compound earn partial credit
    assert expected != pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)


def test_identical_text_scores_100_and_mismatch_raises():
    scores = corpus_scores(REFS, REFS)
    assert scores["bleu"] == pytest.approx(100.0)
    assert scores["tokenized_bleu"] == pytest.approx(100.0)
    assert scores["chrf"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="3 hypotheses but reference stream 0 has 4 lines"):
        corpus_scores(HYPS[:3], REFS)


def test_format_scores_labels_every_number():
    text = format_scores(corpus_scores(HYPS, REFS))
    lines = text.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("sacreBLEU BLEU") and "tok:13a" in lines[0]
    assert lines[1].startswith("sacreBLEU chrF2") and "nc:6" in lines[1]
    assert lines[2].startswith("tokenized BLEU (13a + compound split")
