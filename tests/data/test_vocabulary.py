"""The run directory's SentencePiece model(s): trained once, reused while the settings match,
trained again when one changed; clear errors otherwise.

References: sentencepiece's own `SentencePieceProcessor` loading the saved files, and
SentencePiece trained on the sentences themselves (for the model trained on word counts).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import sentencepiece as spm

from transformer.data.config import DataConfig
from transformer.data.corpus import read_lines
from transformer.data.encoding import CollectedWords
from transformer.data.tokenizer import Tokenizer
from transformer.data.vocabulary import (
    model_paths,
    model_settings,
    saved_tokenizer,
    train_tokenizer,
)
from transformer.data.word_encoding import WordTable

N_LINES = 1000
VOCAB = 400


@pytest.fixture(scope="module")
def sides(shared_data):
    prefix = shared_data / "multi30k" / "train"
    return read_lines(prefix.with_suffix(".en"))[:N_LINES], read_lines(prefix.with_suffix(".de"))[
        :N_LINES
    ]


def collected(sides) -> CollectedWords:
    tables, counts = [], []
    for sentences in sides:
        table = WordTable(None, np.int32)
        ids, _ = table.word_ids(sentences)
        tables.append(table)
        counts.append(table.counts(ids))
    return CollectedWords(tables, counts, len(sides[0]))


def no_reverse():
    raise AssertionError("the other direction's fingerprint is not needed here")


def test_model_paths(tmp_path):
    assert model_paths(tmp_path, shared=True) == [tmp_path / "spm.model"]
    assert model_paths(tmp_path, shared=False) == [
        tmp_path / "spm.src.model",
        tmp_path / "spm.tgt.model",
    ]


@pytest.mark.parametrize("shared", [True, False])
def test_trains_once_then_reuses(sides, tmp_path, shared):
    config = DataConfig(vocab_size=VOCAB, shared_vocab=shared)
    settings = model_settings(config, "fp")
    assert saved_tokenizer(config, tmp_path, settings, no_reverse, print) is None
    trained = train_tokenizer(config, tmp_path, settings, "m30k", collected(sides))
    assert trained.shared == shared
    for path in model_paths(tmp_path, shared):
        processor = spm.SentencePieceProcessor()
        processor.Load(str(path))
        assert processor.get_piece_size() == VOCAB
    messages = []
    reused = saved_tokenizer(config, tmp_path, settings, no_reverse, messages.append)
    assert messages[-1].startswith("reusing SentencePiece model")
    assert reused.src_model_bytes == trained.src_model_bytes
    assert reused.tgt_model_bytes == trained.tgt_model_bytes
    saved = json.loads((tmp_path / "spm.json").read_text())
    assert saved.pop("model") and saved == settings  # and the hash of the model it describes


def test_bpe_from_word_counts_is_the_model_of_the_sentences(sides, tmp_path):
    config = DataConfig(vocab_size=VOCAB)
    ours = train_tokenizer(config, tmp_path, model_settings(config, "fp"), "x", collected(sides))
    reference = spm.SentencePieceProcessor(
        model_proto=Tokenizer.train(sides[0] + sides[1], VOCAB)  # SentencePiece on sentences
    )
    processor = spm.SentencePieceProcessor(model_proto=ours.src_model_bytes)
    pieces = [(processor.id_to_piece(i), processor.get_score(i)) for i in range(VOCAB)]
    assert pieces == [(reference.id_to_piece(i), reference.get_score(i)) for i in range(VOCAB)]
    assert ours.word_level


def test_a_changed_setting_trains_again_and_says_which(sides, tmp_path):
    config = DataConfig(vocab_size=VOCAB)
    train_tokenizer(config, tmp_path, model_settings(config, "fp"), "x", collected(sides))
    for changed, settings in [
        ("vocab_size", model_settings(DataConfig(vocab_size=VOCAB + 1), "fp")),
        ("content", model_settings(config, "another fingerprint")),
        (
            "spm_model_type",
            model_settings(DataConfig(vocab_size=VOCAB, spm_model_type="unigram"), "fp"),
        ),
    ]:
        messages = []
        wanted = DataConfig(vocab_size=settings["vocab_size"])
        assert saved_tokenizer(wanted, tmp_path, settings, no_reverse, messages.append) is None
        assert changed in messages[-1] and "a new one is needed" in messages[-1]
    # The same content under another name (a relative path, the folder moved): reused.
    moved = model_settings(DataConfig(vocab_size=VOCAB, train="/elsewhere/train"), "fp")
    assert saved_tokenizer(config, tmp_path, moved, no_reverse, print) is not None


def test_spm_json_belongs_to_its_model(sides, tmp_path):
    config = DataConfig(vocab_size=VOCAB)
    settings = model_settings(config, "fp")
    train_tokenizer(config, tmp_path, settings, "x", collected(sides))
    other = DataConfig(vocab_size=VOCAB + 50)
    train_tokenizer(other, tmp_path / "other", model_settings(other, "fp"), "x", collected(sides))
    (tmp_path / "spm.model").write_bytes((tmp_path / "other" / "spm.model").read_bytes())
    messages = []  # a model put there by hand (or by another job) under the old spm.json
    assert saved_tokenizer(config, tmp_path, settings, no_reverse, messages.append) is None
    assert "the model file" in messages[-1]
    (tmp_path / "spm.json").write_text("[]")  # valid JSON, not what was written
    assert saved_tokenizer(config, tmp_path, settings, no_reverse, print) is None


def test_a_joint_model_serves_the_other_direction_of_the_same_corpus(sides, tmp_path):
    config = DataConfig(vocab_size=VOCAB)
    train_tokenizer(config, tmp_path, model_settings(config, "en-de fp"), "x", collected(sides))
    swapped = DataConfig(vocab_size=VOCAB, source_lang="de", target_lang="en")
    settings = model_settings(swapped, "de-en fp")
    assert saved_tokenizer(swapped, tmp_path, settings, lambda: "en-de fp", print) is not None
    assert saved_tokenizer(swapped, tmp_path, settings, lambda: "changed", print) is None


def test_clear_errors(sides, tmp_path):
    config = DataConfig(vocab_size=VOCAB)
    train_tokenizer(config, tmp_path, model_settings(config, "fp"), "x", collected(sides))
    bigger = DataConfig(vocab_size=VOCAB + 1)
    with pytest.raises(ValueError, match="vocabulary size"):  # evaluation: no settings to match
        saved_tokenizer(bigger, tmp_path, None, no_reverse, print)
    blank = collected(([""], ["  "]))
    with pytest.raises(ValueError, match="no non-empty sentence pairs"):
        train_tokenizer(config, tmp_path / "b", model_settings(config, "fp"), "blank", blank)


def test_too_small_or_too_large_vocab_size_names_data_vocab_size(tmp_path):
    with pytest.raises(ValueError, match=r"data\.vocab_size \(3\) must be at least 5"):
        DataConfig(vocab_size=3)
    small = collected((["a man rides a bike"] * 20, ["ein mann fährt rad"] * 20))
    for size in (6, 5000):
        config = DataConfig(vocab_size=size)
        with pytest.raises(ValueError, match=rf"data\.vocab_size \({size}\) does not fit"):
            train_tokenizer(config, tmp_path, model_settings(config, "fp"), "tiny", small)


def test_unigram_trains_on_sentences(sides, tmp_path):
    config = DataConfig(vocab_size=VOCAB, spm_model_type="unigram")
    ours = train_tokenizer(
        config, tmp_path, model_settings(config, "fp"), "x", sentences=lambda i: iter(sides[i])
    )
    reference = Tokenizer(Tokenizer.train(sides[0] + sides[1], VOCAB, "unigram"))
    assert ours.src_model_bytes == reference.src_model_bytes
    assert not ours.word_level
