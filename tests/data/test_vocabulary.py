"""The run directory's SentencePiece model(s): trained once, then reused; clear errors otherwise.

The reference is sentencepiece's own `SentencePieceProcessor` loading the saved files.
"""

from __future__ import annotations

import pytest
import sentencepiece as spm

from transformer.data.config import DataConfig
from transformer.data.corpus import ParallelText, read_lines
from transformer.data.vocabulary import load_or_train_tokenizer, model_paths

N_LINES = 1000
VOCAB = 400


@pytest.fixture(scope="module")
def text(shared_data):
    prefix = shared_data / "multi30k" / "train"
    en = read_lines(prefix.with_suffix(".en"))[:N_LINES]
    de = read_lines(prefix.with_suffix(".de"))[:N_LINES]
    return ParallelText(en, de, "multi30k/train", "fingerprint")


def test_model_paths(tmp_path):
    assert model_paths(tmp_path, shared=True) == [tmp_path / "spm.model"]
    assert model_paths(tmp_path, shared=False) == [
        tmp_path / "spm.src.model",
        tmp_path / "spm.tgt.model",
    ]


@pytest.mark.parametrize("shared", [True, False])
def test_trains_once_then_reuses(text, tmp_path, shared):
    config = DataConfig(vocab_size=VOCAB, shared_vocab=shared)
    messages = []
    trained = load_or_train_tokenizer(config, tmp_path, text, messages.append)
    assert messages[-1].startswith("trained SentencePiece bpe model(s)")
    assert trained.shared == shared
    for path in model_paths(tmp_path, shared):
        processor = spm.SentencePieceProcessor()
        processor.Load(str(path))
        assert processor.get_piece_size() == VOCAB
    reused = load_or_train_tokenizer(config, tmp_path, None, messages.append)
    assert messages[-1].startswith("reusing SentencePiece model")
    assert reused.src_model_bytes == trained.src_model_bytes
    assert reused.tgt_model_bytes == trained.tgt_model_bytes


def test_clear_errors(text, tmp_path):
    config = DataConfig(vocab_size=VOCAB)
    with pytest.raises(FileNotFoundError, match="spm.model"):
        load_or_train_tokenizer(config, tmp_path, None, print)
    blank = ParallelText(["", " x"], ["y", "  "], "blank", "fingerprint")
    with pytest.raises(ValueError, match="no non-empty sentence pairs"):
        load_or_train_tokenizer(config, tmp_path, blank, print)
    load_or_train_tokenizer(config, tmp_path, text, print)
    bigger = DataConfig(vocab_size=VOCAB + 1)
    with pytest.raises(ValueError, match="vocabulary size"):
        load_or_train_tokenizer(bigger, tmp_path, text, print)


def test_too_small_or_too_large_vocab_size_names_data_vocab_size(tmp_path):
    with pytest.raises(ValueError, match=r"data\.vocab_size \(3\) must be at least 5"):
        DataConfig(vocab_size=3)
    small = ParallelText(["a man rides a bike"] * 20, ["ein mann fährt rad"] * 20, "tiny", "fp")
    for size in (6, 5000):
        with pytest.raises(ValueError, match=rf"data\.vocab_size \({size}\) does not fit"):
            load_or_train_tokenizer(DataConfig(vocab_size=size), tmp_path, small, log=print)
