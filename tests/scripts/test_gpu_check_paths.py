"""Tests for the paths of scripts/gpu_check.sh: the work folder it makes for itself.

Each test runs the script's shortest real check (`--dry-run --data synthetic --steps f`: the
versions worker on synthetic text, seconds) with TMPDIR in the test's own folder, so that the
work folder the check makes for itself can be looked for afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
