"""Encoded corpora cached on disk: named flat numpy arrays in one `.npz` file per split.

Encoding WMT-size corpora with SentencePiece takes minutes, so `prepare_data` encodes each split
once and stores its token ids here. The file name carries a hash of everything the ids depend
on: the cache format version, the corpus fingerprint (`corpus.corpus_fingerprint`, a hash of
the input files) and the bytes of every SentencePiece model. Editing a corpus or retraining the
vocabulary therefore gives a new file instead of stale ids. Files are written atomically.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from transformer.atomic import atomic_write

CACHE_VERSION = 1


def cache_path(cache_dir: Path, split: str, fingerprint: str, model_bytes: Iterable[bytes]) -> Path:
    """The cache file of one split.

    Args:
        cache_dir: Directory of the cache files.
        split: Split name, the file name's prefix ("train", "valid").
        fingerprint: The corpus fingerprint.
        model_bytes: Serialized SentencePiece model(s) (source, then target).

    Returns:
        `<cache_dir>/<split>-<24 hex digits>.npz`.
    """
    digest = hashlib.blake2b(digest_size=12)
    for part in (str(CACHE_VERSION).encode(), fingerprint.encode(), *model_bytes):
        digest.update(hashlib.blake2b(part).digest())
    return cache_dir / f"{split}-{digest.hexdigest()}.npz"


def save_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write `arrays` under their names, atomically (`transformer.atomic`); makes the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda file: np.savez(file, **arrays))


def load_arrays(path: Path) -> dict[str, np.ndarray]:
    """The arrays that `save_arrays` wrote to `path`, by name (read into memory)."""
    with np.load(path) as arrays:
        return {name: arrays[name] for name in arrays.files}
