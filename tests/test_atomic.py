"""Tests for transformer/atomic.py: the old file survives any failure, no temporary file stays."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from transformer.atomic import atomic_link, atomic_write, atomic_write_text


def listing(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_writes_and_replaces(tmp_path):
    path = tmp_path / "out.txt"
    assert atomic_write_text(path, "one\n") == path
    assert atomic_write(path, lambda file: file.write(b"two\r\n")) == path
    assert path.read_bytes() == b"two\r\n"  # bytes as given, no newline translation
    assert listing(tmp_path) == ["out.txt"]


def test_new_files_get_the_usual_permissions(tmp_path):
    reference = tmp_path / "plain.txt"
    reference.write_text("x")
    atomic_write_text(tmp_path / "atomic.txt", "x")
    assert (tmp_path / "atomic.txt").stat().st_mode == reference.stat().st_mode


@pytest.mark.parametrize("error", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_a_failure_inside_write_keeps_the_old_file_and_no_temporary(tmp_path, error):
    path = tmp_path / "out.txt"
    path.write_text("old\n")

    def write(file):
        file.write(b"half of the new cont")
        raise error

    with pytest.raises(type(error)):
        atomic_write(path, write)
    assert path.read_text() == "old\n"
    assert listing(tmp_path) == ["out.txt"]


def test_a_failure_without_an_old_file_leaves_nothing(tmp_path):
    def write(file):
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        atomic_write(tmp_path / "new.bin", write)
    assert listing(tmp_path) == []


def test_a_failing_rename_keeps_the_old_file_and_names_it(tmp_path, monkeypatch):
    """The error named the hidden temporary file (`/tmp/.out.txt.123.ab.tmp: Operation not
    permitted`, another user's file in a sticky /tmp; bad-input pass): it names the file."""
    path = tmp_path / "out.txt"
    path.write_text("old\n")

    def refuse(src, dst):  # as rename(2) fails: the error carries both names
        raise PermissionError(1, "Operation not permitted", str(src), None, str(dst))

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(PermissionError) as error:
        atomic_write_text(path, "new\n")
    assert (error.value.filename, error.value.strerror) == (str(path), "Operation not permitted")
    assert path.read_text() == "old\n"
    assert listing(tmp_path) == ["out.txt"]


def test_missing_directory_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic_write_text(tmp_path / "missing" / "out.txt", "x")


def test_a_symbolic_link_is_written_through(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    assert atomic_write_text(link, "new") == target
    assert link.is_symlink() and target.read_text() == "new"


def test_link_shares_the_file_or_copies_it(tmp_path, monkeypatch):
    source = tmp_path / "checkpoint_7.pt"
    source.write_bytes(b"weights")
    last = tmp_path / "checkpoint_last.pt"
    last.write_bytes(b"older weights")
    atomic_link(source, last)
    assert os.path.samefile(source, last) and last.read_bytes() == b"weights"

    def no_hard_links(src, dst):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_hard_links)
    best = tmp_path / "checkpoint_best.pt"
    atomic_link(source, best)
    assert best.read_bytes() == b"weights" and not os.path.samefile(source, best)
    assert listing(tmp_path) == ["checkpoint_7.pt", "checkpoint_best.pt", "checkpoint_last.pt"]


def test_link_interrupted_keeps_the_old_file(tmp_path, monkeypatch):
    source = tmp_path / "new.pt"
    source.write_bytes(b"new")
    path = tmp_path / "last.pt"
    path.write_bytes(b"old")

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_link(source, path)
    assert path.read_bytes() == b"old"
    assert listing(tmp_path) == ["last.pt", "new.pt"]


def test_a_device_or_pipe_is_written_in_place():
    devnull = Path(os.devnull)
    if not devnull.exists() or devnull.is_file():
        pytest.skip("no character device to write to")
    assert atomic_write_text(devnull, "discarded") == devnull  # no temporary file in /dev


def test_a_rewrite_keeps_the_permission_bits(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text("old")
    path.chmod(0o600)
    atomic_write_text(path, "new")
    assert path.read_text() == "new" and path.stat().st_mode & 0o777 == 0o600


def test_a_name_near_the_length_limit_can_be_written(tmp_path):
    path = tmp_path / ("n" * 251 + ".txt")  # 255 characters: the longest valid name
    atomic_write_text(path, "x")
    assert path.read_text() == "x" and listing(tmp_path) == [path.name]


@pytest.mark.parametrize("name", ["/dev/fd/{fd}", "/proc/self/fd/{fd}", "{tmp}/link"])
def test_an_own_descriptor_is_written_through_not_replaced(tmp_path, name):
    if not Path("/dev/fd").is_dir() or not Path("/proc/self/fd").is_dir():
        pytest.skip("no /dev/fd or /proc/self/fd here")
    log = tmp_path / "log.txt"
    log.write_text("earlier\n")
    with open(log, "ab") as file:  # as `cmd --output /dev/fd/3 3>> log.txt`
        stream = name.format(fd=file.fileno(), tmp=tmp_path)
        if name == "{tmp}/link":
            Path(stream).symlink_to(f"/dev/fd/{file.fileno()}")
        assert atomic_write_text(stream, "new\n") == Path(stream)
        file.write(b"later\n")  # the descriptor's offset moved past what atomic_write wrote
    assert log.read_text() == "earlier\nnew\nlater\n"
    assert sorted(set(listing(tmp_path)) - {"link"}) == ["log.txt"]  # no temporary file


@pytest.mark.parametrize("mode", ["ab", "wb"])  # `>> log.txt` and `> log.txt`
def test_dev_stdout_redirected_to_a_file_keeps_what_was_printed(tmp_path, mode):
    if not Path("/dev/stdout").exists():
        pytest.skip("no /dev/stdout here")
    log = tmp_path / "log.txt"
    log.write_text("earlier\n")
    code = (
        "from transformer.atomic import atomic_write_text\n"
        "print('printed before')\n"
        "atomic_write_text('/dev/stdout', 'written\\n')\n"
        "print('printed after')\n"
    )
    root = Path(__file__).resolve().parents[1]
    with open(log, mode) as stdout:
        subprocess.run([sys.executable, "-c", code], stdout=stdout, cwd=root, check=True)
    before = "earlier\n" if mode == "ab" else ""
    assert log.read_text() == before + "printed before\nwritten\nprinted after\n"
    assert listing(tmp_path) == ["log.txt"]


def test_temporaries_of_killed_writers_are_removed_and_live_ones_kept(tmp_path):
    """A SIGKILL during a checkpoint save left `.checkpoint_62.pt.<pid>.<hex>.tmp` for good
    (#17, bad-input pass; 92 MB each for the Multi30k model). A real writer is killed with
    SIGKILL in the middle of its write; a live process's temporary and other files stay."""
    import signal
    import time

    from transformer.atomic import remove_stale_temporaries

    writer = (
        "import sys, time; from transformer.atomic import atomic_write; "
        "atomic_write(sys.argv[1], lambda f: (f.write(b'x' * 1000), f.flush(), time.sleep(60)))"
    )
    killed = subprocess.Popen([sys.executable, "-c", writer, str(tmp_path / "c.pt")])
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".c.pt.*.tmp")):
        assert killed.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    (left,) = tmp_path.glob(".c.pt.*.tmp")
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f".d.pt.{alive.pid}.0123abcd.tmp"
        live.write_bytes(b"y")
        other = tmp_path / ".notes.tmp"
        other.write_bytes(b"z")
        assert remove_stale_temporaries(tmp_path) == [left]
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])
    finally:
        alive.kill()
        alive.wait()
