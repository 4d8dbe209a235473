"""Tests for transformer/export/huggingface_parity.py, on a model trained on Multi30k: the
exported directory, loaded as a user loads it, reproduces our logits and greedy outputs; an
export without the d_model reordering is caught."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("google.protobuf")

from transformer.export import huggingface_weights  # noqa: E402
from transformer.export.huggingface import export_huggingface  # noqa: E402
from transformer.export.huggingface_parity import (  # noqa: E402
    check_huggingface,
    generate_ids,
    load_huggingface,
)
from transformer.export.parity import decode_ids  # noqa: E402


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    model, tokenizer, _ = trained
    return export_huggingface(model, tokenizer, tmp_path_factory.mktemp("hf") / "model")


def test_tokenizer_logits_and_greedy_generate_agree(trained, exported, test_sentences):
    model, tokenizer, _ = trained
    tokens, logits, generate = check_huggingface(model, tokenizer, exported, test_sentences(64))
    assert tokens.passed and tokens.identical == 64
    assert logits.passed and logits.max_difference <= 1e-4 and logits.identical == 64
    assert generate.passed and generate.identical >= 63
    assert "max logit difference" in logits.line() and "within 0.0001" in logits.line()


def test_generate_keeps_each_sentences_length_limit(trained, exported, test_sentences):
    model, tokenizer, _ = trained
    marian, _ = load_huggingface(exported)
    with torch.no_grad():  # eos is never chosen: every output runs to its limit
        marian.final_logits_bias[0, model.config.eos_id] = -1e4
    sources = tokenizer.encode_batch(test_sentences(20))
    outputs = generate_ids(marian, sources, max_len_a=0.5, max_len_b=2)
    assert [len(ids) for ids in outputs] == [int(0.5 * len(ids) + 2) for ids in sources]


def test_without_the_reordering_the_logits_differ(trained, test_sentences, tmp_path, monkeypatch):
    model, tokenizer, _ = trained
    monkeypatch.setattr(
        huggingface_weights, "halves_permutation", lambda d_model: torch.arange(d_model)
    )
    export_huggingface(model, tokenizer, tmp_path / "interleaved")
    _, logits, _ = check_huggingface(model, tokenizer, tmp_path / "interleaved", test_sentences(8))
    assert not logits.passed and logits.max_difference > 0.1


def test_greedy_generate_is_our_greedy_search(trained, exported, test_sentences):
    model, tokenizer, _ = trained
    marian, _ = load_huggingface(exported)
    sources = tokenizer.encode_batch(test_sentences(24, "de"))  # German in: any output will do
    assert generate_ids(marian, sources, max_len_b=10) == decode_ids(model, sources, max_len_b=10)
