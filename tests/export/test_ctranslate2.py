"""Tests for transformer/export/ctranslate2.py: our model as a CTranslate2 model directory.

CTranslate2 itself is the reference: the exported directory is loaded by `ctranslate2.Translator`
and its greedy outputs and teacher-forced log-probabilities are compared with our model's.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

ctranslate2 = pytest.importorskip("ctranslate2")

from transformer.export.ctranslate2 import (  # noqa: E402
    BANNED_LOGIT,
    MIN_POSITIONS,
    build_spec,
    export_ctranslate2,
    position_table,
)
from transformer.export.ctranslate2_translate import score_ids, translate_ids  # noqa: E402
from transformer.export.parity import decode_ids, teacher_forced_logits  # noqa: E402


def our_log_probs(model, sources, targets):
    """log P of each target token and the final eos, renormalised without <pad> and <s>."""
    config = model.config
    _, _, _, logits = teacher_forced_logits(model, sources, targets)
    logits[..., [config.pad_id, config.bos_id]] = float("-inf")
    log_probs = torch.log_softmax(logits, dim=-1)
    rows = []
    for row, target in enumerate(targets):
        expected = [*target, config.eos_id]
        rows.append(log_probs[row, torch.arange(len(expected)), torch.tensor(expected)])
    return rows


def largest_difference(model, translator, tokenizer, sources, targets) -> float:
    ours = our_log_probs(model, sources, targets)
    theirs = score_ids(translator, tokenizer, sources, targets)
    return max((a - torch.tensor(b)).abs().max().item() for a, b in zip(ours, theirs, strict=True))


@pytest.fixture
def sources(synthetic_sentences, synthetic_tokenizer):
    return synthetic_tokenizer.encode_batch(synthetic_sentences(24, seed=3))


def test_position_table_is_the_papers_sinusoids_from_position_0():
    table = position_table(d_model=6, max_positions=10)
    assert table.shape == (MIN_POSITIONS, 6)
    for pos in (0, 1, 7, 1023):
        for i in range(3):
            angle = pos / 10000 ** (2 * i / 6)
            assert table[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-6)
    assert position_table(6, 2000).shape == (2000, 6)


@pytest.mark.parametrize(
    "overrides",
    [{}, {"norm_first": True}, {"share_embeddings": False}],
    ids=["post-norm", "pre-norm", "separate-embeddings"],
)
def test_ctranslate2_reproduces_our_greedy_outputs_and_log_probs(
    overrides, make_search_model, synthetic_tokenizer, sources, tmp_path
):
    model = make_search_model(synthetic_tokenizer.vocab_size, **overrides)
    export_ctranslate2(model, synthetic_tokenizer, tmp_path / "ct2")
    translator = ctranslate2.Translator(
        str(tmp_path / "ct2"), compute_type="float32", intra_threads=1
    )
    limits = dict(max_len_a=1.0, max_len_b=5)
    ours = decode_ids(model, sources, beam_size=1, **limits)
    theirs = translate_ids(translator, synthetic_tokenizer, sources, 1, max_positions=128, **limits)
    assert theirs == ours
    assert largest_difference(model, translator, synthetic_tokenizer, sources, ours) < 1e-4


def test_without_our_position_table_ctranslate2s_own_sinusoids_change_the_model(
    make_search_model, synthetic_tokenizer, sources, tmp_path
):
    """The pitfall the exported table avoids: CTranslate2's built-in encoding is not ours."""
    model = make_search_model(synthetic_tokenizer.vocab_size)
    spec = build_spec(model, synthetic_tokenizer)
    optional = ctranslate2.specs.model_spec.OPTIONAL
    spec.encoder.position_encodings.encodings = optional
    spec.decoder.position_encodings.encodings = optional
    spec.validate()
    spec.optimize()
    (tmp_path / "builtin").mkdir()
    spec.save(str(tmp_path / "builtin"))
    translator = ctranslate2.Translator(
        str(tmp_path / "builtin"), compute_type="float32", intra_threads=1
    )
    targets = decode_ids(model, sources, beam_size=1, max_len_b=5)
    assert largest_difference(model, translator, synthetic_tokenizer, sources, targets) > 0.05


def test_pad_and_bos_are_never_produced_even_when_the_model_prefers_bos(
    make_search_model, synthetic_tokenizer, sources, tmp_path
):
    model = make_search_model(synthetic_tokenizer.vocab_size, eos_boost=1.0)
    with torch.no_grad():  # bos now has the largest logit almost everywhere
        model.tgt_embed.weight[model.config.bos_id] *= 6.0
    export_ctranslate2(model, synthetic_tokenizer, tmp_path / "ct2")
    translator = ctranslate2.Translator(
        str(tmp_path / "ct2"), compute_type="float32", intra_threads=1
    )
    theirs = translate_ids(translator, synthetic_tokenizer, sources, 1, max_len_b=5)
    assert theirs == decode_ids(model, sources, beam_size=1, max_len_b=5)
    assert not any({model.config.pad_id, model.config.bos_id} & set(ids) for ids in theirs)


def test_directory_holds_config_vocabulary_and_sentencepiece_model(
    make_search_model, synthetic_tokenizer, tmp_path
):
    model = make_search_model(synthetic_tokenizer.vocab_size)
    out = export_ctranslate2(model, synthetic_tokenizer, tmp_path / "ct2")
    config = json.loads((out / "config.json").read_text())
    assert config["decoder_start_token"] == "<s>" and config["eos_token"] == "</s>"
    assert config["add_source_bos"] is False and config["add_source_eos"] is False
    assert config["layer_norm_epsilon"] == pytest.approx(1e-5)
    vocabulary = json.loads((out / "shared_vocabulary.json").read_text())
    assert vocabulary == synthetic_tokenizer.target_pieces(range(synthetic_tokenizer.vocab_size))
    assert (out / "spm.model").read_bytes() == synthetic_tokenizer.src_model_bytes
    bias = build_spec(model, synthetic_tokenizer).decoder.projection.bias
    assert bias[0] == bias[2] == BANNED_LOGIT and not bias[3:].any()


def test_int8_export_is_smaller_and_translates(
    make_search_model, synthetic_tokenizer, sources, tmp_path
):
    model = make_search_model(synthetic_tokenizer.vocab_size, d_model=64, d_ff=256)
    float32 = export_ctranslate2(model, synthetic_tokenizer, tmp_path / "f32")
    int8 = export_ctranslate2(model, synthetic_tokenizer, tmp_path / "int8", "int8")
    assert (int8 / "model.bin").stat().st_size < 0.6 * (float32 / "model.bin").stat().st_size
    translator = ctranslate2.Translator(str(int8), intra_threads=1)
    outputs = translate_ids(translator, synthetic_tokenizer, sources, 4, max_len_b=5)
    assert len(outputs) == len(sources)


def test_refusals_name_the_problem(
    make_search_model, synthetic_tokenizer, tiny_tokenizer, tmp_path
):
    model = make_search_model(synthetic_tokenizer.vocab_size)
    with pytest.raises(ValueError, match="quantization"):
        export_ctranslate2(model, synthetic_tokenizer, tmp_path / "a", "int4")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ValueError, match="not an empty directory"):
        export_ctranslate2(model, synthetic_tokenizer, tmp_path / "full")
    other = make_search_model(tiny_tokenizer.vocab_size + 1)
    with pytest.raises(ValueError, match="vocabularies"):
        build_spec(other, tiny_tokenizer)
