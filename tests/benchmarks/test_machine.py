"""benchmarks/machine.py: the machine facts a benchmark report records, checked against what the
operating system and git say themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from benchmarks.machine import cpu_times, machine_info, machine_load, source_revision
from benchmarks.workers import ProcessSettings

REPO = Path(__file__).resolve().parents[2]
linux_only = pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs /proc")

# In a fresh process: the peak resident set after touching 300 MiB, then after freeing them and
# resetting the peak (what a benchmark does between two engines).
PEAK_SCRIPT = """
import json
from benchmarks.machine import peak_memory_mib, reset_peak_memory
reset_peak_memory("cpu")
before = peak_memory_mib("cpu")
block = bytearray(300 * 2**20)  # zero-filled: every page is written
during = peak_memory_mib("cpu")
del block
reset_peak_memory("cpu")
after = peak_memory_mib("cpu")
print(json.dumps([before, during, after]))
"""


@linux_only
def test_peak_memory_sees_an_allocation_and_forgets_it_after_a_reset():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    before, during, after = json.loads(done.stdout)
    assert during - before >= 290  # the 300 MiB block, in MiB
    if os.access("/proc/self/clear_refs", os.W_OK):
        assert after < during - 250  # the reset dropped the peak back to what is resident


@linux_only
def test_cpu_times_count_up_and_idle_is_part_of_the_total():
    first = cpu_times()
    sum(i * i for i in range(200_000))  # some CPU time
    second = cpu_times()
    assert 0 <= first[1] <= first[0]
    assert second[0] >= first[0] and second[1] >= first[1]


def test_machine_load_is_a_share_of_the_machine():
    load = machine_load(sample_seconds=0.2)
    assert load["sample_seconds"] == 0.2
    assert len(load["loadavg_1_5_15"]) == 3
    busy = load["cpu_busy_percent"]
    assert busy is None or 0.0 <= busy <= 100.0


def test_source_revision_is_what_git_says():
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    if head.returncode != 0:
        assert source_revision() == {"commit": None, "dirty": None}
        return
    revision = source_revision()
    assert revision["commit"] == head.stdout.strip()
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert revision["dirty"] == bool(status.stdout.strip())


def test_machine_info_records_the_settings_and_versions():
    settings = ProcessSettings(threads=1)
    info = machine_info(settings)
    assert info["settings"] == asdict(settings)
    assert info["cpu_count"] == os.cpu_count()
    assert info["torch_version"] == torch.__version__
    assert "gpu" not in info  # a CPU run names no GPU
