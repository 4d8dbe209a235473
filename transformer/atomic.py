"""Atomic file writes: a file is either its old version or its new one, never half written.

Every file this project writes (checkpoints, SentencePiece models, encoded-data caches, the run
directory's config and metrics, the command-line tools' outputs) goes through `atomic_write`
or, for a second name of a finished checkpoint, `atomic_link`:

1. the content goes to a temporary file in the same directory (same file system, so that the
   rename is atomic), named `.<name>.<pid>.<random>.tmp` (`<name>` cut to 100 characters, so
   that a long but valid name stays within the 255-byte limit);
2. the file is flushed and fsynced, so the data is on disk before its name is;
3. `os.replace` renames it over the final name (atomic on POSIX and Windows);
4. the directory is fsynced, so the rename itself survives a power cut.

A failure at any point, Ctrl-C (KeyboardInterrupt) included, removes the temporary file and
leaves the old file, if any, untouched. A rewrite keeps the file's permission bits. A symbolic
link is written through (its target is replaced, the link stays).

A path that names a stream rather than a file is written in place, with no temporary file and
no rename: a path that exists but is not a regular file (a FIFO, a terminal), and any path
under /dev or /proc (or a link to one). One of this process's own descriptors (/dev/stdout,
/dev/stderr, /dev/fd/N, /proc/self/fd/N) is written through that descriptor, after Python's
stdout and stderr are flushed: `cmd --output /dev/stdout >> log.txt` appends to the log, in
order after what the command printed, instead of replacing log.txt by a new file.

Source: the write, fsync, rename, fsync-the-directory sequence of Dan Luu's "Files are hard"
(2015).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_link", "atomic_write", "atomic_write_text", "remove_stale_temporaries"]


def atomic_write(path: str | Path, write: Callable[[BinaryIO], object]) -> Path:
    """Write a file atomically: `write(file)` fills a temporary file that then replaces `path`.

    Args:
        path: The final file. Its directory must exist. A stream (/dev/stdout, a FIFO) is
            written in place (see the module docstring).
        write: Called once with the temporary file, opened for binary writing; it must not
            close it. Whatever it returns is ignored.

    Returns:
        The path written (the target of `path` when `path` is a symbolic link).

    Raises:
        OSError: when the file cannot be written or replaced (no such directory, no
            permission, disk full); nothing is left behind.
        Any exception of `write`, unchanged, after the temporary file is removed.

    Example:
        >>> atomic_write("out.txt", lambda file: file.write(b"hello\\n"))  # doctest: +SKIP
    """
    path = Path(path)
    if writes_in_place(path):
        _write_in_place(path, _stream_name(path), write)  # a stream or device: nothing to replace
        return path
    path = _final_path(path)
    tmp = _temporary_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as file:
            if path.exists():  # a rewrite keeps the file's permission bits (600 stays 600)
                os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
            write(file)
            file.flush()
            os.fsync(file.fileno())
        try:
            os.replace(tmp, path)
        except OSError as error:  # named after the file asked for, not the hidden temporary
            raise type(error)(error.errno, error.strerror, str(path)) from error
    except BaseException:  # KeyboardInterrupt too: never leave the temporary file behind
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """`atomic_write` of `text` encoded as UTF-8 (newlines written as given, never translated).

    Returns:
        The path written.
    """
    return atomic_write(path, lambda file: file.write(text.encode("utf-8")))


def atomic_link(source: str | Path, path: str | Path) -> Path:
    """Make `path` a second name of the finished file `source`, atomically.

    A hard link when the file system allows it (no extra disk space or time), else a copy
    (`atomic_write`); either way `path` is replaced in one rename, so a reader sees the old
    file or the new one. Used for checkpoint_last.pt / checkpoint_best.pt, which name the
    numbered checkpoint of the same step.

    Args:
        source: An existing, complete file.
        path: The name to (re)point at it.

    Returns:
        The path written.

    Raises:
        OSError: when `source` cannot be read or `path` cannot be written.
    """
    source, path = Path(source), _final_path(path)
    tmp = _temporary_name(path)
    try:
        os.link(source, tmp)
    except OSError:  # no hard links here (another file system, FAT, some network mounts)
        with open(source, "rb") as original:
            return atomic_write(path, lambda file: shutil.copyfileobj(original, file, 1 << 24))
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)
    return path


_TEMPORARY = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp")


def remove_stale_temporaries(directory: str | Path) -> list[Path]:
    """Remove the temporary files (`.<name>.<pid>.<random>.tmp`) that writers killed by
    SIGKILL or a power cut left in `directory`: those whose process no longer runs. A file of
    a live process (another writer at work, or a reused pid) stays.

    Returns:
        The files removed.
    """
    removed = []
    for path in Path(directory).glob(".*.tmp"):
        match = _TEMPORARY.fullmatch(path.name)
        if match is None or not path.is_file() or _process_runs(int(match["pid"])):
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _process_runs(pid: int) -> bool:
    """Whether a process `pid` exists (signal 0 checks without sending anything)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OverflowError, OSError):
        return True  # someone else's process (EPERM), or a pid we cannot ask about: keep it
    return True


def _final_path(path: str | Path) -> Path:
    """`path`, or the file a symbolic link `path` points to (so that the link survives)."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _temporary_name(path: Path) -> Path:
    """A fresh hidden name next to `path`; the pid and random part keep writers apart.

    Only the first 100 characters of `path.name` are kept, so that the temporary name stays
    within the 255-byte limit of a file name (NAME_MAX) even when `path.name` is near it.
    """
    return path.with_name(f".{path.name[:100]}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


_STANDARD_STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def writes_in_place(path: str | Path) -> bool:
    """Whether `atomic_write` writes `path` in place.

    Args:
        path: An output path, existing or not.

    Returns:
        True for a stream or device (/dev/stdout, /dev/null, anything under /dev/ or /proc/, a
        FIFO, a link to one), which has no file to replace; False for a file (new or not).
    """
    path = Path(path)
    return _stream_name(path) is not None or (path.exists() and not path.is_file())


def _stream_name(path: Path) -> str | None:
    """The /dev or /proc name that `path` is, or that its chain of symbolic links reaches
    (`log -> /dev/stdout`); None for an ordinary file name."""
    name = os.path.abspath(path)
    for _ in range(40):  # as many links as the kernel follows before ELOOP
        if name.startswith(("/dev/", "/proc/")):
            return name
        if not os.path.islink(name):
            return None
        name = os.path.abspath(os.path.join(os.path.dirname(name), os.readlink(name)))
    return None


def _own_descriptor(stream: str) -> int | None:
    """The descriptor N of this process that `stream` names (/dev/stdout, /dev/fd/N,
    /proc/self/fd/N, /proc/<this pid>/fd/N), else None."""
    if stream in _STANDARD_STREAMS:
        return _STANDARD_STREAMS[stream]
    pattern = rf"/dev/fd/(\d+)|/proc/(?:self|thread-self|{os.getpid()})/fd/(\d+)"
    match = re.fullmatch(pattern, stream)
    return None if match is None else int(match.group(1) or match.group(2))


def _write_in_place(path: Path, stream: str | None, write: Callable[[BinaryIO], object]) -> None:
    """`write` straight into a stream: through the descriptor itself when `stream` is one of
    this process's (same offset, so nothing written to it before is overwritten), else by
    opening `path` as a shell's `>` does."""
    fd = None if stream is None else _own_descriptor(stream)
    if fd is None:
        with open(path, "wb") as file:
            write(file)
        return
    for standard in (sys.stdout, sys.stderr):  # what the command printed comes first
        if standard is not None:
            standard.flush()
    with os.fdopen(os.dup(fd), "wb") as file:
        write(file)


def _fsync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
