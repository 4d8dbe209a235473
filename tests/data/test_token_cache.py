"""The encoded-corpus cache: a lossless round trip, and a key that changes with every input."""

from __future__ import annotations

import numpy as np

from transformer.data.token_cache import cache_path, load_arrays, save_arrays


def test_arrays_round_trip_without_a_leftover_tmp_file(tmp_path):
    arrays = {
        "src_tokens": np.array([5, 6, 7, 65535], dtype=np.uint16),
        "src_offsets": np.array([0, 1, 4], dtype=np.int64),
        "blank": np.array([False, True]),
    }
    path = tmp_path / "cache" / "train-x.npz"  # the directory does not exist yet
    save_arrays(path, arrays)
    loaded = load_arrays(path)
    assert loaded.keys() == arrays.keys()
    for name, array in arrays.items():
        assert loaded[name].dtype == array.dtype
        np.testing.assert_array_equal(loaded[name], array)
    assert [p.name for p in path.parent.iterdir()] == ["train-x.npz"]


def test_key_is_stable_and_changes_with_corpus_and_models(tmp_path):
    base = cache_path(tmp_path, "train", "corpus-a", [b"src", b"tgt"])
    assert base == cache_path(tmp_path, "train", "corpus-a", [b"src", b"tgt"])
    assert base.parent == tmp_path and base.name.startswith("train-") and base.suffix == ".npz"
    others = [
        cache_path(tmp_path, "train", "corpus-b", [b"src", b"tgt"]),
        cache_path(tmp_path, "train", "corpus-a", [b"src2", b"tgt"]),
        cache_path(tmp_path, "train", "corpus-a", [b"src", b"tgt2"]),
        cache_path(tmp_path, "train", "corpus-a", [b"tgt", b"src"]),
    ]
    assert len({p.name for p in others} | {base.name}) == 5
    assert cache_path(tmp_path, "valid", "corpus-a", [b"src", b"tgt"]).name.startswith("valid-")
