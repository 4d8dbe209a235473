"""Tokenizer: special ids, round trips, unknown characters, bytes embedding, separate vocabularies.

References are sentencepiece's own `SentencePieceProcessor` and `ModelConfig`'s default ids.
"""

from __future__ import annotations

import io
import unicodedata

import pytest
import sentencepiece as spm
import torch

from transformer.data.corpus import read_lines
from transformer.data.tokenizer import Tokenizer
from transformer.model.config import ModelConfig

N_LINES = 2000
VOCAB = 800


@pytest.fixture(scope="module")
def train_lines(shared_data):
    prefix = shared_data / "multi30k" / "train"
    return (
        read_lines(prefix.with_suffix(".en"))[:N_LINES],
        read_lines(prefix.with_suffix(".de"))[:N_LINES],
    )


@pytest.fixture(scope="module")
def tok(train_lines):
    en, de = train_lines
    return Tokenizer(Tokenizer.train(en + de, VOCAB))


def reference(model_bytes: bytes) -> spm.SentencePieceProcessor:
    processor = spm.SentencePieceProcessor()
    processor.LoadFromSerializedProto(model_bytes)
    return processor


def test_special_ids_match_model_config(tok):
    config = ModelConfig()
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id) == (
        config.pad_id,
        config.unk_id,
        config.bos_id,
        config.eos_id,
    )
    assert tok.source_pieces([0, 1, 2, 3]) == ["<pad>", "<unk>", "<s>", "</s>"]
    assert tok.vocab_size == tok.src_vocab_size == tok.tgt_vocab_size == VOCAB
    assert tok.shared and tok.tgt_model_bytes == tok.src_model_bytes


def test_encode_matches_sentencepiece_and_has_no_bos_eos(tok, train_lines):
    processor = reference(tok.src_model_bytes)
    sentences = train_lines[0][:50] + train_lines[1][:50]
    assert tok.encode_batch(sentences) == [processor.encode(s) for s in sentences]
    assert tok.encode_target_batch(sentences) == [tok.encode_target(s) for s in sentences]
    for ids in tok.encode_batch(sentences):
        assert tok.bos_id not in ids and tok.eos_id not in ids and tok.pad_id not in ids


def test_decode_encode_round_trip_on_covered_text(tok, train_lines):
    sentences = train_lines[0][:200] + train_lines[1][:200]
    # "Covered": every character is in the alphabet (rare ones, like a lone digit in this
    # small sample, fall outside character_coverage and become unk) and the text is already
    # in SentencePiece's normal form (NFKC, single spaces; nmt_nfkc collapses "a  b").
    covered = [
        s
        for s in sentences
        if tok.unk_id not in tok.encode_target(s)
        and s == " ".join(s.split())
        and s == unicodedata.normalize("NFKC", s)
    ]
    assert len(covered) > 0.9 * len(sentences)
    for sentence in covered:
        assert tok.decode(tok.encode_target(sentence)) == sentence
    assert tok.decode_batch(tok.encode_target_batch(covered)) == covered


def test_unknown_characters_map_to_unk(tok):
    ids = tok.encode("A dog ☃ runs 中文")
    assert tok.unk_id in ids
    assert tok.encode_batch(["☃☃", ""]) == [tok.encode("☃☃"), []]
    text = tok.decode(ids)  # no crash; the known words survive
    assert "dog" in text and "runs" in text


def test_decode_stops_at_eos_and_skips_pad_and_bos(tok):
    ids = tok.encode_target("Ein Mann fährt Fahrrad.")
    noisy = [tok.bos_id, *ids, tok.eos_id, *ids, tok.pad_id]
    assert tok.decode(noisy) == tok.decode(ids)
    assert tok.decode_batch([noisy, [tok.pad_id] * 3]) == [tok.decode(ids), ""]
    assert tok.decode(torch.tensor(noisy)) == tok.decode(ids)


def test_whitespace_is_normalized(tok):
    assert tok.decode(tok.encode_target("  Ein  Hund. ")) == "Ein Hund."


def test_model_bytes_rebuild_the_same_tokenizer(tok, tmp_path):
    sentence = "Two young, White males are outside near many bushes."
    again = Tokenizer(tok.src_model_bytes)
    assert again.encode(sentence) == tok.encode(sentence)
    paths = tok.save(tmp_path)
    assert [p.name for p in paths] == ["spm.model"]
    assert Tokenizer.from_file(paths[0]).encode(sentence) == tok.encode(sentence)
    # A checkpoint holding the bytes loads with weights_only=True.
    buffer = io.BytesIO()
    torch.save({"spm_model": tok.src_model_bytes, "tgt_spm_model": None}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    assert Tokenizer(loaded["spm_model"]).encode(sentence) == tok.encode(sentence)


def test_training_is_deterministic(train_lines):
    en, de = train_lines
    assert Tokenizer.train(en[:500] + de[:500], 300) == Tokenizer.train(en[:500] + de[:500], 300)


def test_separate_vocabularies(train_lines, tmp_path):
    en, de = train_lines
    src_bytes, tgt_bytes = Tokenizer.train(en, 500), Tokenizer.train(de, 600)
    tok = Tokenizer(src_bytes, tgt_bytes)
    assert not tok.shared
    assert (tok.src_vocab_size, tok.tgt_vocab_size, tok.vocab_size) == (500, 600, 500)
    assert tok.encode(en[0]) == reference(src_bytes).encode(en[0])
    assert tok.encode_target(de[0]) == reference(tgt_bytes).encode(de[0])
    assert tok.decode(tok.encode_target(de[0])) == de[0]
    assert tok.target_pieces(tok.encode_target(de[0])) == reference(tgt_bytes).encode(
        de[0], out_type=str
    )
    paths = tok.save(tmp_path)
    assert [p.name for p in paths] == ["spm.src.model", "spm.tgt.model"]
    loaded = Tokenizer.from_file(*paths)
    assert loaded.tgt_model_bytes == tgt_bytes and not loaded.shared


def test_unigram_option(train_lines):
    en, de = train_lines
    tok = Tokenizer(Tokenizer.train(en[:1000] + de[:1000], 500, model_type="unigram"))
    assert reference(tok.src_model_bytes).id_to_piece(3) == "</s>"
    assert tok.decode(tok.encode_target(de[5])) == de[5]


def test_bad_inputs_raise_clear_errors(train_lines, tmp_path):
    with pytest.raises(ValueError, match="not a valid SentencePiece model"):
        Tokenizer(b"not a model")
    with pytest.raises(ValueError, match="must be one of bpe, unigram"):
        Tokenizer.train(train_lines[0], 500, model_type="word2vec")
    with pytest.raises(ValueError, match="Vocabulary size too high"):
        Tokenizer.train(train_lines[0][:5], 5000)
    with pytest.raises(FileNotFoundError, match="missing.model"):
        Tokenizer.from_file(tmp_path / "missing.model")
    # A model with sentencepiece's default ids (unk=0, bos=1, eos=2, no pad) is rejected.
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(train_lines[0]), model_writer=model, vocab_size=300, minloglevel=2
    )
    with pytest.raises(ValueError, match="special ids"):
        Tokenizer(model.getvalue())


def test_ctrl_c_while_sentencepiece_reads_its_input_is_an_interrupt_not_a_bad_vocabulary():
    """SentencePiece's C++ trainer turns an exception from the sentence iterator into a
    RuntimeError naming it; a Ctrl-C must stay an interrupt (exit 130), not read as
    "data.vocab_size does not fit"."""

    def interrupted():
        yield "ein Satz"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Tokenizer.train(interrupted(), vocab_size=10)


def test_usable_cores_is_the_affinity_and_falls_back_off_linux(monkeypatch):
    from transformer.data import tokenizer

    monkeypatch.setattr(tokenizer.os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert tokenizer.usable_cores() == 3
    monkeypatch.delattr(tokenizer.os, "sched_getaffinity")  # macOS and Windows have none
    monkeypatch.setattr(tokenizer.os, "cpu_count", lambda: 6)
    assert tokenizer.usable_cores() == 6
