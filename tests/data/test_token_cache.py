"""The encoded-corpus cache: a lossless round trip through memory maps, entries that appear
whole or not at all, and a key that changes with every input."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from transformer.data.token_cache import (
    ArrayWriter,
    SequentialReader,
    cache_path,
    load_arrays,
    save_arrays,
)


def test_arrays_round_trip_memory_mapped_without_a_leftover_tmp_entry(tmp_path):
    arrays = {
        "src_tokens": np.array([5, 6, 7, 65535], dtype=np.uint16),
        "src_offsets": np.array([0, 1, 4], dtype=np.int64),
        "empty": np.zeros(0, dtype=np.int32),
    }
    path = tmp_path / "cache" / "train-x"  # the directory does not exist yet
    save_arrays(path, arrays)
    loaded = load_arrays(path)
    assert set(loaded) == set(arrays)
    for name, array in arrays.items():
        assert loaded[name].dtype == array.dtype
        np.testing.assert_array_equal(loaded[name], array)
    assert isinstance(loaded["src_tokens"].base, np.memmap)  # shared pages, not a copy
    assert not loaded["src_tokens"].flags.writeable
    assert [p.name for p in path.parent.iterdir()] == ["train-x"]


def test_chunks_appended_equal_the_whole_array(tmp_path):
    whole = np.random.default_rng(0).integers(0, 1000, 1000).astype(np.int32)
    writer = ArrayWriter(tmp_path / "e")
    for start in range(0, 1000, 300):
        writer.append("a", whole[start : start + 300])
    assert not (tmp_path / "e").exists()  # nothing visible before commit
    writer.commit()
    np.testing.assert_array_equal(load_arrays(tmp_path / "e")["a"], whole)
    mixed = ArrayWriter(tmp_path / "g")
    mixed.append("a", whole)
    with pytest.raises(TypeError, match="array 'a' is int32, not int64"):
        mixed.append("a", whole.astype(np.int64))
    mixed.abort()


def test_an_aborted_or_killed_writer_leaves_nothing_visible(tmp_path):
    writer = ArrayWriter(tmp_path / "e")
    writer.append("a", np.arange(5))
    writer.abort()
    assert list(tmp_path.iterdir()) == []
    # A writer killed mid-way leaves its temporary entry; the next writer removes it.
    code = (
        "import os, numpy as np; from transformer.data.token_cache import ArrayWriter; "
        f"w = ArrayWriter(__import__('pathlib').Path({str(tmp_path / 'e')!r})); "
        "w.append('a', np.arange(5)); os._exit(9)"
    )
    subprocess.run([sys.executable, "-c", code], check=False)
    assert len(list(tmp_path.glob(".e.tmp-*"))) == 1
    ArrayWriter(tmp_path / "other").abort()
    assert list(tmp_path.iterdir()) == []


def test_a_damaged_entry_is_reported(tmp_path):
    save_arrays(tmp_path / "e", {"a": np.arange(10)})
    data = (tmp_path / "e" / "a.bin").read_bytes()
    os.unlink(tmp_path / "e" / "a.bin")
    (tmp_path / "e" / "a.bin").write_bytes(data[:-8])
    with pytest.raises(ValueError, match="a.bin has 72 bytes, expected 80"):
        load_arrays(tmp_path / "e")
    with pytest.raises(FileNotFoundError):
        load_arrays(tmp_path / "missing")


def test_key_is_stable_and_changes_with_corpus_and_models(tmp_path):
    base = cache_path(tmp_path, "train", "corpus-a", [b"src", b"tgt"])
    assert base == cache_path(tmp_path, "train", "corpus-a", [b"src", b"tgt"])
    assert base.parent == tmp_path and base.name.startswith("train-")
    others = {
        cache_path(tmp_path, "train", "corpus-b", [b"src", b"tgt"]),
        cache_path(tmp_path, "train", "corpus-a", [b"src2", b"tgt"]),
        cache_path(tmp_path, "train", "corpus-a", [b"src", b"tgt2"]),
        cache_path(tmp_path, "train", "corpus-a", [b"tgt", b"src"]),
    }
    assert base not in others and len(others) == 4
    assert cache_path(tmp_path, "valid", "corpus-a", [b"src", b"tgt"]).name.startswith("valid-")


def test_a_sequential_reader_reads_the_array_in_pieces(tmp_path):
    whole = np.arange(1000, dtype=np.int32)
    save_arrays(tmp_path / "e", {"a": whole})
    reader = SequentialReader(tmp_path / "e", "a")
    pieces = [reader.read(n) for n in (1, 299, 0, 500, 200)]
    reader.close()
    np.testing.assert_array_equal(np.concatenate(pieces), whole)
    assert pieces[1].dtype == np.int32 and not isinstance(pieces[1], np.memmap)
