"""Encoded corpora cached on disk: flat arrays in one directory per split, opened memory-mapped.

Encoding WMT-size corpora with SentencePiece takes minutes, so `prepare_data` encodes each split
once and stores its token ids here. The directory name carries a hash of everything the ids
depend on: the cache format version, the corpus fingerprint (`corpus.corpus_fingerprint`, a
hash of the input files) and the bytes of every SentencePiece model. Editing a corpus or
retraining the vocabulary therefore gives a new directory instead of stale ids.

An entry is a directory of raw arrays (`NAME.bin`, native byte order) and `meta.json` (each
array's dtype and length). It is filled under a temporary name and renamed into place when
complete (`ArrayWriter.commit`), so a reader finds a whole entry or none. `load_arrays` opens
the arrays read-only with `numpy.memmap`: the processes of a torchrun job on one machine then
share one copy of the token ids in the page cache instead of holding one copy each.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from transformer.atomic import atomic_write_text

CACHE_VERSION = 2
_META = "meta.json"


def cache_path(cache_dir: Path, split: str, fingerprint: str, model_bytes: Iterable[bytes]) -> Path:
    """The cache directory of one split.

    Args:
        cache_dir: Directory of the cache entries.
        split: Split name, the entry name's prefix ("train", "valid").
        fingerprint: The corpus fingerprint.
        model_bytes: Serialized SentencePiece model(s) (source, then target).

    Returns:
        `<cache_dir>/<split>-<24 hex digits>`.
    """
    digest = hashlib.blake2b(digest_size=12)
    for part in (str(CACHE_VERSION).encode(), fingerprint.encode(), *model_bytes):
        digest.update(hashlib.blake2b(part).digest())
    return cache_dir / f"{split}-{digest.hexdigest()}"


class ArrayWriter:
    """Fills one cache entry array by array (appending in chunks), then renames it into place.

    Args:
        path: The entry's final directory; its parent is created.

    Example:
        >>> writer = ArrayWriter(cache_dir / "train-0123")  # doctest: +SKIP
        >>> for chunk in chunks:
        ...     writer.append("src_tokens", chunk)
        >>> writer.commit()
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _remove_abandoned(self.path.parent)
        self.tmp = self.path.with_name(
            f".{self.path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        )
        self.tmp.mkdir()
        self._arrays: dict[str, dict] = {}
        self._files: dict[str, object] = {}

    def append(self, name: str, array: np.ndarray) -> None:
        """Add `array` (1-D) to the end of array `name` (created by the first call)."""
        array = np.ascontiguousarray(array)
        meta = self._arrays.setdefault(name, {"dtype": array.dtype.str, "length": 0})
        if array.dtype.str != meta["dtype"]:
            raise TypeError(f"array {name!r} is {np.dtype(meta['dtype'])}, not {array.dtype}")
        if name not in self._files:
            self._files[name] = open(self.tmp / f"{name}.bin", "wb")  # noqa: SIM115
        self._files[name].write(array.tobytes())
        meta["length"] += len(array)

    def commit(self) -> Path:
        """Write `meta.json`, flush every file to disk and rename the entry into place.

        Returns:
            The entry's directory. When another process committed the same entry first, its
            entry is kept (same key, same content) and this one is removed.
        """
        for file in self._files.values():
            file.flush()
            os.fsync(file.fileno())
            file.close()
        self._files.clear()
        meta = {"version": CACHE_VERSION, "arrays": self._arrays}
        atomic_write_text(self.tmp / _META, json.dumps(meta, indent=1) + "\n")
        try:
            os.rename(self.tmp, self.path)
        except OSError:  # the entry exists: written by another process in the meantime
            if not (self.path / _META).is_file():
                raise
            shutil.rmtree(self.tmp, ignore_errors=True)
        return self.path

    def abort(self) -> None:
        """Remove the unfinished entry (after an error or an interrupt)."""
        for file in self._files.values():
            file.close()
        self._files.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _remove_abandoned(cache_dir: Path) -> None:
    """Remove temporary entries left by processes of this machine that no longer run (killed
    while writing); those of running processes are left alone."""
    for tmp in cache_dir.glob(".*.tmp-*"):
        try:
            pid = int(tmp.name.rsplit(".tmp-", 1)[1].split("-")[0])
            os.kill(pid, 0)
        except (ValueError, IndexError):
            continue
        except ProcessLookupError:
            shutil.rmtree(tmp, ignore_errors=True)
        except PermissionError:  # another user's running process
            continue


def save_arrays(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    """Write `arrays` under their names as one entry at `path` (see `ArrayWriter`)."""
    writer = ArrayWriter(path)
    try:
        for name, array in arrays.items():
            writer.append(name, array)
        return writer.commit()
    except BaseException:
        writer.abort()
        raise


def load_arrays(path: Path) -> dict[str, np.ndarray]:
    """The arrays of the entry at `path`, by name, opened read-only and memory-mapped.

    Raises:
        FileNotFoundError: when there is no entry at `path`.
        ValueError: an entry of another format version, or an array file whose size does
            not match `meta.json` (cut short by a full disk); the caller encodes again.
    """
    meta_path = Path(path) / _META
    if not meta_path.is_file():
        raise FileNotFoundError(f"no cache entry at {path}")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        version, arrays = meta["version"], meta["arrays"]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{meta_path} is unreadable: {error}") from error
    if version != CACHE_VERSION:
        raise ValueError(f"{path} is cache format {version}, not {CACHE_VERSION}")
    loaded = {}
    for name, spec in arrays.items():
        file, dtype, length = Path(path) / f"{name}.bin", np.dtype(spec["dtype"]), spec["length"]
        size = file.stat().st_size if file.is_file() else 0
        if size != length * dtype.itemsize:
            raise ValueError(f"{file} has {size} bytes, expected {length * dtype.itemsize}")
        # A plain ndarray view of the mapping: slicing it costs what slicing any array costs.
        loaded[name] = (
            np.asarray(np.memmap(file, dtype=dtype, mode="r", shape=(length,)))
            if length
            else np.zeros(0, dtype=dtype)
        )
    return loaded


class SequentialReader:
    """Reads one array of an entry front to back in pieces, with plain reads (no mapping, so
    the pieces already read do not stay resident in this process, as mapped pages would).

    Args:
        path: The entry.
        name: The array.
    """

    def __init__(self, path: Path, name: str) -> None:
        meta = json.loads((Path(path) / _META).read_text(encoding="utf-8"))
        self.dtype = np.dtype(meta["arrays"][name]["dtype"])
        self._file = open(Path(path) / f"{name}.bin", "rb")  # noqa: SIM115

    def read(self, count: int) -> np.ndarray:
        """The next `count` values."""
        return np.fromfile(self._file, dtype=self.dtype, count=count)

    def close(self) -> None:
        self._file.close()
