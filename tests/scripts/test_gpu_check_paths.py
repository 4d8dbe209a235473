"""Tests for the paths of scripts/gpu_check.sh: the work folder it makes for itself.

Each test runs the script's shortest real check (`--dry-run --data synthetic --steps f`: the
versions worker on synthetic text, seconds) with TMPDIR in the test's own folder, so that the
work folder the check makes for itself can be looked for afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.gpu_check import build_parser

REPO = Path(__file__).resolve().parents[2]


def _check(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    """Run gpu_check.sh's dry run of step f with `args`; the process and its TMPDIR."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = dict(os.environ, PYTHON=sys.executable, TMPDIR=str(temporary), OMP_NUM_THREADS="1")
    argv = ["bash", "scripts/gpu_check.sh", "--dry-run", "--steps", "f", *args]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return done, temporary


def test_the_work_folder_is_removed(tmp_path):
    """Every run without --work-dir left its /tmp/gpu_check_<pid> folder behind."""
    out = tmp_path / "gpu_check.json"
    done, temporary = _check(tmp_path, "--data", "synthetic", "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["finished"] and report["steps"]["f_versions"]["status"] == "ok"
    assert out.with_suffix(".log").is_file()
    work = Path(report["data"]["path"]).parent  # the synthetic text was written in it
    assert work.parent == temporary and work.name.startswith("gpu_check_")
    assert not work.exists() and list(temporary.iterdir()) == []


def test_a_given_work_dir_is_kept(tmp_path):
    out, work = tmp_path / "gpu_check.json", tmp_path / "work"
    done, _ = _check(tmp_path, "--data", "synthetic", "--out", str(out), "--work-dir", str(work))
    assert done.returncode == 0, done.stderr
    assert (work / "versions.json").is_file() and (work / "data").is_dir()


def test_a_check_that_stops_early_removes_its_work_folder(tmp_path):
    """A --data folder without the corpora ends the check after its work folder was made."""
    (tmp_path / "empty").mkdir()
    out = tmp_path / "gpu_check.json"
    done, temporary = _check(tmp_path, "--data", str(tmp_path / "empty"), "--out", str(out))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(f"gpu_check: {tmp_path / 'empty'} lacks")
    (work,) = [
        line.rpartition(" work dir ")[2] for line in done.stdout.splitlines() if "work dir" in line
    ]
    assert Path(work).name.startswith("gpu_check_") and not Path(work).exists()
    assert list(temporary.iterdir()) == []


@pytest.mark.parametrize("kind", ["empty", "file"])
def test_a_work_dir_that_is_no_folder_is_refused(tmp_path, kind):
    """`--work-dir ''` made a temporary folder of its own and then left it behind; a file
    ended in a FileExistsError traceback."""
    given = "" if kind == "empty" else str(tmp_path / "afile")
    (tmp_path / "afile").write_text("keep", encoding="utf-8")
    done, temporary = _check(tmp_path, "--out", str(tmp_path / "out.json"), "--work-dir", given)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.endswith(f"--work-dir {given!r}: a folder (leave it out for one in /tmp)")
    assert list(temporary.iterdir()) == [] and (tmp_path / "afile").read_text() == "keep"


def test_an_out_that_is_no_regular_file_is_refused(tmp_path):
    """Run as root, `--out /dev/null` replaced the device with a regular file (the report is
    written beside it and renamed over it)."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    done, _ = _check(tmp_path, "--out", str(fifo))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("a .json file in an existing directory")
    assert fifo.is_fifo()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_check_in_lines_of_its_own(tmp_path, signum):
    """A Ctrl-C printed a KeyboardInterrupt traceback; a SIGTERM before the first step ended
    in "all ok", and later in 1 rather than 128 + the signal, as a shell reports it."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = dict(os.environ, PYTHON=sys.executable, TMPDIR=str(temporary), OMP_NUM_THREADS="1")
    out = tmp_path / "out.json"
    argv = ["bash", "scripts/gpu_check.sh", "--dry-run", "--data", "synthetic", "--out", str(out)]
    pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process = subprocess.Popen(argv, cwd=REPO, env=env, **pipes)
    for line in process.stdout:  # gpu_check.sh's lines, then the check's first line, printed
        if "work dir" in line:  # after its handlers are in place
            break
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 128 + signum and "Traceback" not in stderr, stderr
    assert f"interrupted ({signal.Signals(signum).name})" in stdout
    assert "all ok" not in stdout
    assert json.loads(out.read_text(encoding="utf-8"))["finished"] is False
    assert list(temporary.iterdir()) == []


def test_relative_paths_name_places_under_the_callers_directory(tmp_path):
    """`--out x.json` run from another directory wrote into the checkout (the script changes to
    it). A stand-in PYTHON prints the arguments the check would receive."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n', encoding="utf-8")
    fake.chmod(0o755)
    caller = tmp_path / "caller"
    caller.mkdir()
    given = ["--out", "x.json", "--work-dir=w", "--data", "synthetic", "--steps", "f", "--data="]
    given += ["--work-dir", "--dry-run"]  # a missing value stays missing: argparse names it
    done = subprocess.run(
        ["bash", str(REPO / "scripts/gpu_check.sh"), *given],
        cwd=caller,
        env=dict(os.environ, PYTHON=str(fake)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    received = done.stdout.splitlines()[-len(given) :]
    assert received == [
        "--out", f"{caller}/x.json", f"--work-dir={caller}/w", "--data", "synthetic",
        "--steps", "f", "--data=", "--work-dir", "--dry-run",
    ]  # fmt: skip
    with pytest.raises(SystemExit):  # a shortened flag would escape the rewriting
        build_parser().parse_args(["--ou", "x.json"])
