"""The steps of a preparation: encoded entries reused across filter settings, kept rows cached,
nothing half-written or left behind after an interrupt. The reference for the kept rows is
`filter_pairs` on the whole encoded corpus."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from transformer.data import encoding
from transformer.data.config import DataConfig
from transformer.data.corpus import read_lines
from transformer.data.dataset import ParallelDataset, filter_pairs
from transformer.data.prepare import DataNotPrepared, prepare_data


@pytest.fixture
def config(shared_data, tmp_path):
    prefix = shared_data / "multi30k" / "train"
    for lang in ("en", "de"):
        lines = read_lines(f"{prefix}.{lang}")[:1500]
        (tmp_path / f"train.{lang}").write_text("".join(f"{x}\n" for x in lines), "utf-8")
    return DataConfig(train=str(tmp_path / "train"), valid=None, vocab_size=500, max_len=20)


def test_another_filter_reuses_the_encoded_corpus_and_caches_its_own_rows(config, tmp_path):
    run = tmp_path / "run"
    first = prepare_data(config, run, log=None)
    messages = []
    looser = DataConfig(**{**config.__dict__, "max_len": 40, "max_len_ratio": 2.0})
    second = prepare_data(looser, run, log=messages.append)
    assert not any("encode" in m for m in messages)  # the token ids were there
    assert any(m.startswith("train: filter") for m in messages)
    (entry,) = (run / "cache").glob("train-*")
    assert len(list(entry.glob("kept-*"))) == 2
    corpus = ParallelDataset(
        second.train.src_tokens,
        second.train.src_offsets,
        second.train.tgt_tokens,
        second.train.tgt_offsets,
        np.arange(1500),
    )
    expected, report = filter_pairs(corpus, 40, 2.0)
    np.testing.assert_array_equal(second.train.line_numbers, expected.line_numbers)
    np.testing.assert_array_equal(second.train.tgt_lengths, expected.tgt_lengths)
    assert second.train_report == report and len(first.train) < len(second.train)


def test_other_processes_wait_for_the_kept_rows_too(config, tmp_path):
    run = tmp_path / "run"
    prepare_data(config, run, log=None)
    (entry,) = (run / "cache").glob("train-*")
    (kept,) = entry.glob("kept-*")
    shutil.rmtree(kept)
    with pytest.raises(DataNotPrepared, match="not filtered yet"):
        prepare_data(config, run, log=None, build=False)


def test_an_interrupt_while_encoding_leaves_no_entry_and_no_scratch(config, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("transformer.data.preparation.encode_collected", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare_data(config, tmp_path / "run", log=None)
    cache = tmp_path / "run" / "cache"
    assert list(cache.iterdir()) == []  # neither the entry nor its temporary
    assert not list((tmp_path / "run").glob(".*words*"))  # nor the word ids
    monkeypatch.undo()
    again = prepare_data(config, tmp_path / "run", log=None)  # the model is reused
    assert len(again.train) > 0 and encoding.token_dtype(again.tokenizer) == np.uint16


def test_a_failed_vocabulary_leaves_no_scratch(config, tmp_path):
    too_big = DataConfig(**{**config.__dict__, "vocab_size": 100_000})
    with pytest.raises(ValueError, match=r"data\.vocab_size \(100000\) does not fit"):
        prepare_data(too_big, tmp_path / "run", log=None)
    assert list((tmp_path / "run" / "cache").iterdir()) == []
    assert not list((tmp_path / "run").glob(".*words*"))


def test_a_home_relative_cache_dir_is_expanded(config, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    homed = DataConfig(**{**config.__dict__, "cache_dir": "~/cache"})
    prepare_data(homed, tmp_path / "run", log=None)
    assert any((tmp_path / "home" / "cache").glob("train-*"))
    assert not (tmp_path / "~").exists()


@pytest.mark.parametrize(
    ("cache", "reason"),
    [
        ("file", "it is a file"),
        ("file/cache", "a folder above it is a file"),
        ("link", "it is a link to .*gone, which does not exist"),  # said 'File exists'
    ],
)
def test_a_cache_dir_that_cannot_be_made_is_one_line_before_any_work(
    config, tmp_path, cache, reason
):
    (tmp_path / "file").write_text("not a directory\n")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    blocked = DataConfig(**{**config.__dict__, "cache_dir": str(tmp_path / cache)})
    expected = rf"data\.cache_dir \({tmp_path / cache}\) cannot be made: {reason}$"
    with pytest.raises(ValueError, match=expected):
        prepare_data(blocked, tmp_path / "run", log=None)
    assert not any((tmp_path / "run").glob("*.model"))  # nothing was trained first


def _lock(folder, locked: bool) -> None:
    """Make `folder` unwritable (immutable as root, whom permissions do not stop) or writable."""
    if os.geteuid() != 0:
        folder.chmod(0o555 if locked else 0o755)
    elif shutil.which("chattr") is None:
        pytest.skip("running as root without chattr: no way to make a folder unwritable")
    elif subprocess.run(["chattr", "+i" if locked else "-i", str(folder)]).returncode:
        pytest.skip(f"chattr cannot make {folder} immutable on this filesystem")


def test_a_cache_dir_that_cannot_be_written_is_one_line_and_a_complete_one_is_read(
    config, tmp_path
):
    cache = tmp_path / "cache"
    cache.mkdir()
    shared = DataConfig(**{**config.__dict__, "cache_dir": str(cache)})
    _lock(cache, True)
    try:
        expected = rf"data\.cache_dir \({cache}\) cannot be written: (Operation not permitted|Permission denied)$"  # noqa: E501
        with pytest.raises(ValueError, match=expected):
            prepare_data(shared, tmp_path / "run", log=None)
        _lock(cache, False)
        first = prepare_data(shared, tmp_path / "run", log=None)  # writes the entries
        _lock(cache, True)
        again = prepare_data(shared, tmp_path / "run", log=None)  # only reads them
        other = prepare_data(shared, tmp_path / "other", log=None)  # a new run shares them
    finally:
        _lock(cache, False)
    assert np.array_equal(again.train.src_tokens, first.train.src_tokens)
    assert np.array_equal(other.train.src_tokens, first.train.src_tokens)


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_cache_dir_is_refused(config, blank):
    with pytest.raises(ValueError, match=rf"data\.cache_dir \('{blank}'\) is blank"):
        DataConfig(**{**config.__dict__, "cache_dir": blank})
