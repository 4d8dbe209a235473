"""Tests for transformer/export/huggingface.py: the directory loads the documented way, offline,
and the loaded `MarianMTModel` computes our logits (Hugging Face's own code is the reference)."""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("google.protobuf")

from transformer.data.tokenizer import Tokenizer  # noqa: E402
from transformer.export.huggingface import export_huggingface  # noqa: E402


def load(directory, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = transformers.MarianMTModel.from_pretrained(str(directory)).eval()
    return model, transformers.AutoTokenizer.from_pretrained(str(directory))


@pytest.mark.parametrize("share_embeddings", [True, False], ids=["shared", "separate"])
def test_marian_computes_our_logits_on_padded_batches(
    share_embeddings, make_model, synthetic_tokenizer, random_batch, tmp_path, monkeypatch
):
    model = make_model(synthetic_tokenizer.vocab_size, share_embeddings=share_embeddings)
    export_huggingface(model, synthetic_tokenizer, tmp_path / "hf")
    marian, _ = load(tmp_path / "hf", monkeypatch)
    src = random_batch(0, synthetic_tokenizer.vocab_size, [9, 3, 6, 1])
    tgt_in = random_batch(1, synthetic_tokenizer.vocab_size, [4, 7, 2, 5])
    tgt_in[:, 0] = model.config.bos_id
    with torch.no_grad():
        expected = model(src, tgt_in)
        logits = marian(
            input_ids=src, attention_mask=src.ne(0).long(), decoder_input_ids=tgt_in
        ).logits
    real = tgt_in.ne(0)  # (B, T): positions before the target padding
    assert (logits - expected).abs()[real].max() < 1e-4


def test_config_tokenizer_and_files_make_it_our_model(
    make_model, synthetic_tokenizer, synthetic_sentences, tmp_path, monkeypatch
):
    model = make_model(synthetic_tokenizer.vocab_size)
    out = export_huggingface(model, synthetic_tokenizer, tmp_path / "hf")
    marian, hf_tokenizer = load(out, monkeypatch)
    config = marian.config
    assert config.activation_function == "relu" and config.scale_embedding is True
    assert config.share_encoder_decoder_embeddings is True and config.tie_word_embeddings
    assert (config.pad_token_id, config.bos_token_id, config.eos_token_id) == (0, 2, 3)
    assert config.decoder_start_token_id == 2 and config.forced_eos_token_id is None
    assert marian.lm_head.weight.data_ptr() == marian.model.shared.weight.data_ptr()
    generation = marian.generation_config
    assert generation.suppress_tokens == [0, 2] and generation.num_beams == 1
    assert generation.max_new_tokens == model.config.max_positions
    texts = synthetic_sentences(20, seed=9)
    assert hf_tokenizer(texts)["input_ids"] == synthetic_tokenizer.encode_batch(texts)
    assert hf_tokenizer.pad_token_id == 0 and hf_tokenizer.eos_token_id == 3
    names = {path.name for path in out.iterdir()}
    assert {"config.json", "model.safetensors", "generation_config.json"} <= names
    assert {"tokenizer.json", "tokenizer_config.json", "spm.model"} <= names
    assert json.loads((out / "config.json").read_text())["model_type"] == "marian"


def test_what_marian_cannot_hold_is_refused_by_name(
    make_model, synthetic_tokenizer, synthetic_sentences, tmp_path
):
    vocab = synthetic_tokenizer.vocab_size
    with pytest.raises(ValueError, match="pre-norm"):
        export_huggingface(make_model(vocab, norm_first=True), synthetic_tokenizer, tmp_path / "a")
    with pytest.raises(ValueError, match="layer_norm_eps"):
        export_huggingface(
            make_model(vocab, layer_norm_eps=1e-6), synthetic_tokenizer, tmp_path / "b"
        )
    with pytest.raises(ValueError, match="even"):
        export_huggingface(
            make_model(vocab, d_model=33, n_heads=3), synthetic_tokenizer, tmp_path / "c"
        )
    separate = Tokenizer(synthetic_tokenizer.src_model_bytes, synthetic_tokenizer.src_model_bytes)
    with pytest.raises(ValueError, match="shared SentencePiece"):
        export_huggingface(make_model(vocab), separate, tmp_path / "d")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "x").write_text("x")
    with pytest.raises(ValueError, match="not an empty directory"):
        export_huggingface(make_model(vocab), synthetic_tokenizer, tmp_path / "e")
    assert not any((tmp_path / name).exists() for name in "abcd")
