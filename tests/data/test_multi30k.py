"""Tests for transformer/data/multi30k.py: finding Multi30k locally, writing a download, and
the error (naming the local-file alternative) when neither works."""

from __future__ import annotations

import pytest

from transformer.data.multi30k import find_multi30k


def test_finds_multi30k_under_transformer_data_dir(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    assert find_multi30k(tmp_path / "download") == shared_data / "multi30k"


def test_uses_an_earlier_download(tmp_path, monkeypatch):
    monkeypatch.delenv("TRANSFORMER_DATA_DIR", raising=False)
    folder = tmp_path / "multi30k"
    folder.mkdir()
    for name in ("train", "val", "test_2016_flickr"):
        for lang in ("en", "de"):
            (folder / f"{name}.{lang}").write_text("a\n", encoding="utf-8")
    assert find_multi30k(folder) == folder


def test_offline_without_local_files_says_what_to_do(tmp_path, monkeypatch, hub_offline):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(tmp_path / "nothing-here"))
    with pytest.raises(FileNotFoundError, match="bentrevett/multi30k.*TRANSFORMER_DATA_DIR"):
        find_multi30k(tmp_path / "download")


def test_offline_a_data_dir_without_multi30k_is_shown_resolved(tmp_path, monkeypatch, hub_offline):
    """The hint repeated the relative value the user gave (`../shared/data`), which resolves
    against the current directory (#17, new-user pass): it now says where that is."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", "../elsewhere/data")
    with pytest.raises(FileNotFoundError) as raised:
        find_multi30k(tmp_path / "download")
    resolved = (tmp_path / "../elsewhere/data").resolve()
    assert f"TRANSFORMER_DATA_DIR=../elsewhere/data is {resolved}" in str(raised.value)


def test_relative_data_dir_comes_back_absolute(shared_data, tmp_path, monkeypatch):
    """A relative TRANSFORMER_DATA_DIR must not be resolved twice (by us, then by the trainer)."""
    monkeypatch.chdir(shared_data.parent)
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", shared_data.name)
    found = find_multi30k(tmp_path / "download")
    assert found.is_absolute() and found == (shared_data / "multi30k").resolve()


def test_a_download_is_written_as_one_sentence_per_line(tmp_path, monkeypatch):
    """The download branch, with `datasets.load_dataset` answered by a local DatasetDict built
    by `datasets` itself (no network here): every row becomes exactly one line, a newline
    inside a sentence included."""
    datasets = pytest.importorskip("datasets")
    rows = {
        "train": {"en": ["A dog.", "Two\nmen."], "de": ["Ein Hund.", "Zwei\nMänner."]},
        "validation": {"en": ["A cat."], "de": ["Eine Katze."]},
        "test": {"en": ["A bird.", " Trees. "], "de": ["Ein Vogel.", " Bäume. "]},
    }
    local = datasets.DatasetDict({k: datasets.Dataset.from_dict(v) for k, v in rows.items()})
    asked = []
    monkeypatch.setattr(datasets, "load_dataset", lambda name: asked.append(name) or local)
    monkeypatch.delenv("TRANSFORMER_DATA_DIR", raising=False)
    folder = find_multi30k(tmp_path / "download")
    assert asked == ["bentrevett/multi30k"] and folder == (tmp_path / "download").resolve()
    files = {"train": "train", "validation": "val", "test": "test_2016_flickr"}
    for split, name in files.items():
        for lang in ("en", "de"):
            lines = (folder / f"{name}.{lang}").read_text(encoding="utf-8").splitlines()
            assert lines == [s.replace("\n", " ").strip() for s in rows[split][lang]]
    assert find_multi30k(tmp_path / "download") == folder  # found again, not downloaded
    assert asked == ["bentrevett/multi30k"]
