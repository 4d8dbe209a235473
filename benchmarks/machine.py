"""Facts about the machine that a benchmark report records: peak memory, load, CPU, versions.

`benchmarks/benchmark.py` writes them next to its figures, so that a reader can tell which
machine, which commit and how busy a machine gave them.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from dataclasses import asdict
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from benchmarks.workers import ProcessSettings


def reset_peak_memory(device_type: str) -> None:
    """Reset the peak-memory counter (CUDA allocator, or the process' peak RSS on Linux)."""
    if device_type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        return
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM, the peak resident set size
    except OSError:
        pass


def peak_memory_mib(device_type: str) -> float | None:
    """Peak memory since `reset_peak_memory`: CUDA allocated bytes, or peak process RSS (CPU)."""
    if device_type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB -> MiB
    except OSError:
        return None
    return None


def cpu_times() -> tuple[int, int] | None:
    """All CPUs' (total, idle + iowait) clock ticks since boot, from /proc/stat (None elsewhere)."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values), idle


def machine_load(sample_seconds: float = 2.0) -> dict:
    """Load averages and the share of all CPUs busy over a short sample (other processes only,
    when called while the benchmark's own workers are idle)."""
    first = cpu_times()
    time.sleep(sample_seconds)
    second = cpu_times()
    busy = None
    if first and second and second[0] > first[0]:
        total, idle = second[0] - first[0], second[1] - first[1]
        busy = round(100.0 * (total - idle) / total, 1)
    load1, load5, load15 = os.getloadavg()
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "loadavg_1_5_15": [round(load1, 2), round(load5, 2), round(load15, 2)],
        "cpu_busy_percent": busy,
        "sample_seconds": sample_seconds,
    }


def source_revision() -> dict:
    """The git commit of the measured code and whether the working tree had changes.

    Returns:
        {"commit": 40-hex str or None, "dirty": bool or None} (None outside a git checkout).
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(status.strip())}


def machine_info(settings: ProcessSettings) -> dict:
    """CPU model, core count, memory, library versions and the process settings."""
    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        model = names[0] if names else model
    except OSError:
        pass
    memory_gib = None
    try:
        with open("/proc/meminfo") as f:
            memory_gib = round(int(f.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    try:
        import transformers

        transformers_version = transformers.__version__
    except ImportError:
        transformers_version = None
    info = {
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "memory_gib": memory_gib,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch_version": torch.__version__,
        "transformers_version": transformers_version,
        "settings": asdict(settings),
    }
    if settings.device == "cuda" and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info
