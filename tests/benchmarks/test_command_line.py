"""Every runnable file of benchmarks/ starts both as `python benchmarks/X.py` and with -m."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUNNABLE = (
    "benchmark",
    "cpu_epochs",
    "cpu_malloc",
    "cpu_processes",
    "cpu_step_time",
    "ctranslate2_decoding",
    "decoding_features",
    "linear_kernels",
    "make_corpus",
    "prepare_scale",
)
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def test_the_runnable_files_are_the_ones_with_a_main():
    with_main = {
        p.stem
        for p in (REPO / "benchmarks").glob("*.py")
        if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")
    }
    assert with_main == set(RUNNABLE)


@pytest.mark.parametrize("name", RUNNABLE)
def test_help_as_a_module_from_the_repo_root(name):
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", "--help"],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:")


@pytest.mark.parametrize("name", RUNNABLE)
def test_help_as_a_file_from_anywhere(name, tmp_path):
    """From another directory too; benchmarks/ itself is taken off sys.path (`-v` lists every
    module file imported): its cuda.py must not be imported as NVIDIA's `cuda` package."""
    done = subprocess.run(
        [sys.executable, "-v", str(REPO / "benchmarks" / f"{name}.py"), "--help"],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:")
    assert str(REPO / "benchmarks" / "cuda.py") not in done.stderr
