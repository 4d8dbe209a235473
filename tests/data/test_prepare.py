"""prepare_data: SentencePiece training/reuse, encoding, caching, filtering and drop reports.

Token ids are checked against sentencepiece's own processor loaded from the saved model.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import sentencepiece as spm

from transformer.data.batching import BatchIterator
from transformer.data.config import DataConfig
from transformer.data.corpus import read_lines
from transformer.data.prepare import prepare_data

N_LINES = 2000
VOCAB = 600
ARRAYS = ("src_tokens", "src_offsets", "tgt_tokens", "tgt_offsets")
LONG = " ".join(["dog"] * 100)  # far more than max_len=64 tokens


@pytest.fixture(scope="module")
def slice_lines(shared_data):
    prefix = shared_data / "multi30k" / "train"
    en = read_lines(prefix.with_suffix(".en"))[:N_LINES]
    de = read_lines(prefix.with_suffix(".de"))[:N_LINES]
    return en, de


def write_corpus(directory, name, en, de):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.en").write_text("".join(f"{x}\n" for x in en), encoding="utf-8")
    (directory / f"{name}.de").write_text("".join(f"{x}\n" for x in de), encoding="utf-8")
    return str(directory / name)


@pytest.fixture
def corpus(tmp_path, slice_lines):
    """A real slice plus 2 empty pairs (one side only), 1 overlong pair and 1 unknown-char pair."""
    en, de = list(slice_lines[0]), list(slice_lines[1])
    en[10], de[20], en[30], de[40] = "", "   ", LONG, "Ein ☃ 中文 Hund."
    train = write_corpus(tmp_path / "data", "train", en, de)
    valid = write_corpus(tmp_path / "data", "valid", slice_lines[0][:50], slice_lines[1][:50])
    config = DataConfig(train=train, valid=valid, vocab_size=VOCAB, max_len=64, test=None)
    return config, en, de


def processor(path):
    sp = spm.SentencePieceProcessor()
    sp.Load(str(path))
    return sp


def test_prepare_filters_counts_and_encodes(corpus, tmp_path):
    config, en, de = corpus
    messages = []
    prepared = prepare_data(config, tmp_path / "run", log=messages.append)
    sp = processor(tmp_path / "run" / "spm.model")
    empty = {10, 20}
    too_long = {
        i
        for i, (s, t) in enumerate(zip(en, de, strict=True))
        if i not in empty and max(len(sp.encode(s)), len(sp.encode(t))) > 64
    }
    assert 30 in too_long
    dropped = len(empty) + len(too_long)
    report = f"dropped {dropped} of {N_LINES} pairs: 2 empty, {len(too_long)} longer than 64 tokens"
    assert str(prepared.train_report) == report
    assert f"train: {report}" in messages
    assert len(prepared.train) == N_LINES - dropped
    kept_lines = prepared.train.line_numbers
    assert set(kept_lines.tolist()) == set(range(N_LINES)) - empty - too_long
    assert 40 in kept_lines
    assert sp.get_piece_size() == VOCAB and sp.pad_id() == 0 and sp.eos_id() == 3
    for i in (0, 1, 39, 40, len(prepared.train) - 1):
        line = int(kept_lines[i])
        src, tgt = prepared.train[i]
        assert src.tolist() == sp.encode(en[line]) and tgt.tolist() == sp.encode(de[line])
    unk_row = int(np.flatnonzero(kept_lines == 40)[0])
    assert sp.unk_id() in prepared.train[unk_row][1].tolist()
    assert prepared.valid_src_text == read_lines(config.valid + ".en")[:50]
    assert prepared.valid_ref_text == read_lines(config.valid + ".de")
    assert len(prepared.valid) == 50 and prepared.tokenizer.vocab_size == VOCAB


def test_unk_pieces_are_counted_per_split(corpus, tmp_path):
    """The log names how many pieces of each split are unk (characters outside the alphabet),
    counted here with sentencepiece's own encoder over every line of the corpus."""
    config, en, de = corpus
    messages = []
    prepare_data(config, tmp_path / "run", log=messages.append)
    sp = processor(tmp_path / "run" / "spm.model")
    valid_en, valid_de = read_lines(config.valid + ".en"), read_lines(config.valid + ".de")
    for split, src, tgt in (("train", en, de), ("valid", valid_en, valid_de)):
        counts = [sum(sp.encode(line).count(sp.unk_id()) for line in side) for side in (src, tgt)]
        said = [m for m in messages if m.startswith(f"{split}: ") and "pieces are unk" in m]
        if split == "train":
            assert counts[1] >= 3  # the snowman and the two Chinese characters of line 40
        if any(counts):
            assert said == [
                f"{split}: {counts[0]:,} source and {counts[1]:,} target pieces are unk "
                "(characters outside the SentencePiece alphabet; data.spm_character_coverage "
                f"{config.spm_character_coverage:g} leaves out the rarest)"
            ]
        else:
            assert said == []


def test_second_run_reuses_model_and_cache(corpus, tmp_path):
    config, _, _ = corpus
    first = prepare_data(config, tmp_path / "run", log=None)
    messages = []
    second = prepare_data(config, tmp_path / "run", log=messages.append)
    assert any(m.startswith("reusing SentencePiece model") for m in messages)
    assert any(m.startswith("train: loaded cached token ids") for m in messages)
    assert second.tokenizer.src_model_bytes == first.tokenizer.src_model_bytes
    for name in ("src_tokens", "src_offsets", "tgt_tokens", "tgt_offsets", "line_numbers"):
        np.testing.assert_array_equal(getattr(second.train, name), getattr(first.train, name))
    # Editing the corpus changes the cache key: the new content is encoded, not the stale cache.
    with open(config.train + ".en", "a", encoding="utf-8") as f:
        f.write("A new dog.\n")
    with open(config.train + ".de", "a", encoding="utf-8") as f:
        f.write("Ein neuer Hund.\n")
    third = prepare_data(config, tmp_path / "run", log=None)
    assert len(third.train) == len(first.train) + 1
    assert len(list((tmp_path / "run" / "cache").glob("train-*"))) == 2


def test_a_cache_file_cut_short_is_encoded_again(corpus, tmp_path):
    config, _, _ = corpus
    first = prepare_data(config, tmp_path / "run", log=None)
    (cached,) = (tmp_path / "run" / "cache").glob("train-*")
    expected = {name: np.array(getattr(first.train, name)) for name in ARRAYS}
    del first  # its arrays map the files
    tokens = cached / "src_tokens.bin"
    cut = tokens.read_bytes()[:100]
    tokens.unlink()  # a new file: the mapped one is never changed in place
    tokens.write_bytes(cut)  # what a damaged disk leaves
    messages = []
    again = prepare_data(config, tmp_path / "run", log=messages.append)
    assert any("unreadable" in m and "encoding again" in m for m in messages)
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(again.train, name), expected[name])


def test_either_direction(corpus, tmp_path):
    config, _, _ = corpus
    en_de = prepare_data(config, tmp_path / "run", log=None)
    swapped = DataConfig(**{**config.__dict__, "source_lang": "de", "target_lang": "en"})
    de_en = prepare_data(swapped, tmp_path / "run", log=None)  # reuses the joint model
    np.testing.assert_array_equal(de_en.train.src_tokens, en_de.train.tgt_tokens)
    np.testing.assert_array_equal(de_en.train.tgt_offsets, en_de.train.src_offsets)
    assert de_en.valid_src_text == en_de.valid_ref_text


def test_length_ratio_filter(corpus, tmp_path):
    config, _, _ = corpus
    plain = prepare_data(config, tmp_path / "a", log=None)
    ratio = DataConfig(**{**config.__dict__, "max_len_ratio": 1.5})
    filtered = prepare_data(ratio, tmp_path / "b", log=None)
    src, tgt = plain.train.src_lengths, plain.train.tgt_lengths
    expected = int((np.maximum(src, tgt) / np.minimum(src, tgt) > 1.5).sum())
    assert filtered.train_report.bad_ratio == expected > 0
    assert str(filtered.train_report).endswith(f", {expected} with length ratio above 1.5")
    assert len(filtered.train) == len(plain.train) - expected


def test_separate_vocabularies(corpus, tmp_path):
    config, en, de = corpus
    separate = DataConfig(**{**config.__dict__, "shared_vocab": False})
    prepared = prepare_data(separate, tmp_path / "run", log=None)
    assert not prepared.tokenizer.shared
    sp_src = processor(tmp_path / "run" / "spm.src.model")
    sp_tgt = processor(tmp_path / "run" / "spm.tgt.model")
    assert prepared.train[0][0].tolist() == sp_src.encode(en[0])
    assert prepared.train[0][1].tolist() == sp_tgt.encode(de[0])


def test_a_changed_data_setting_trains_the_model_again(corpus, tmp_path):
    config, en, de = corpus
    prepare_data(config, tmp_path / "run", log=None)
    messages = []
    bigger = DataConfig(**{**config.__dict__, "vocab_size": VOCAB + 10})
    prepared = prepare_data(bigger, tmp_path / "run", log=messages.append)
    assert any("vocab_size" in m and "a new one is needed" in m for m in messages)
    assert processor(tmp_path / "run" / "spm.model").get_piece_size() == VOCAB + 10
    assert prepared.tokenizer.vocab_size == VOCAB + 10
    other = write_corpus(tmp_path / "data", "other", en[:1500], de[:1500])
    messages.clear()
    moved = prepare_data(
        DataConfig(**{**bigger.__dict__, "train": other}), tmp_path / "run", log=messages.append
    )
    assert any("train" in m and "a new one is needed" in m for m in messages)
    assert len(moved.train) + moved.train_report.dropped == 1500


def test_train_false_loads_model_only(corpus, tmp_path):
    config, _, _ = corpus
    with pytest.raises(FileNotFoundError, match="spm.model"):
        prepare_data(config, tmp_path / "run", train=False, log=None)
    prepare_data(config, tmp_path / "run", log=None)
    again = prepare_data(config, tmp_path / "run", train=False, log=None)
    assert again.train is None and len(again.valid) == 50


def test_clear_errors(corpus, tmp_path):
    config, _, _ = corpus
    prepare_data(config, tmp_path / "run", log=None)
    bigger = DataConfig(**{**config.__dict__, "vocab_size": VOCAB + 1})
    with pytest.raises(ValueError, match="vocabulary size"):  # evaluation cannot retrain
        prepare_data(bigger, tmp_path / "run", train=False, log=None)
    tiny = DataConfig(**{**config.__dict__, "max_len": 1})
    with pytest.raises(ValueError, match="train data .* is empty after filtering"):
        prepare_data(tiny, tmp_path / "run", log=None)
    missing = DataConfig(**{**config.__dict__, "train": str(tmp_path / "nope")})
    with pytest.raises(FileNotFoundError, match=r"nope\.en"):
        prepare_data(missing, tmp_path / "other", log=None)
    blank_prefix = write_corpus(tmp_path, "blank", ["", " "], ["x", ""])
    blank = DataConfig(**{**config.__dict__, "train": blank_prefix})
    with pytest.raises(ValueError, match="no non-empty sentence pairs"):
        prepare_data(blank, tmp_path / "blank_run", log=None)


@pytest.mark.slow
def test_prepare_all_of_multi30k(shared_data, tmp_path, monkeypatch):
    """Whole Multi30k (29000 pairs, vocab 8000): time it and measure padding at 4096 tokens."""
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    start = time.perf_counter()
    prepared = prepare_data(DataConfig(vocab_size=8000), tmp_path / "run", log=None)
    seconds = time.perf_counter() - start
    assert len(prepared.train) + prepared.train_report.dropped == 29000
    assert len(prepared.valid_src_text) == 1014
    iterator = BatchIterator(prepared.train, max_tokens=4096, seed=1)
    real = padded = 0
    for batch in iterator.epoch(1):
        padded += batch.src.numel() + batch.tgt_out.numel()
        real += batch.n_src_tokens + batch.n_tgt_tokens
    padding = 1 - real / padded
    print(f"\nMulti30k prepare: {seconds:.1f} s on {os.cpu_count()} cores; padding {padding:.1%}")
    assert padding < 0.10
