"""Time CPU training updates with glibc's malloc as it comes and with `keep_freed_memory`.

    python benchmarks/cpu_malloc.py [--config configs/multi30k.yaml] [--threads 2] [--rounds 8]
    python -m benchmarks.cpu_malloc [--config configs/multi30k.yaml] [--threads 2] [--rounds 8]

Builds the trainer of a config (`transformer.train.trainer.Trainer`: real batches of its
training data, validation off, a temporary run directory) and runs its update step (forward,
label-smoothed loss, backward, Adam) in one process, switching malloc's settings between rounds:
each round takes `--updates` batches and trains on them once with each setting, the order
alternating round by round, so that the load of other processes falls on both alike. The first
update after a switch is not timed (the switch itself costs: the heap grows or is trimmed).
Prints, per setting, the median target tokens per second over the rounds (and their range),
and per update the minor page faults and the user and system CPU seconds, and the share of the
machine's CPUs that other processes used meanwhile; then the ratio of the two settings' rates
round by round (each round trains both on the same batches).

The settings:

- "glibc": malloc as a training process has it after its first updates. A fresh process
  starts with an mmap threshold and a trim threshold of 128 KiB and raises them as it frees
  mapped blocks, to at most 32 MiB and 64 MiB (the GNU C library manual, "Memory Allocation
  Tunables"; mallopt(3)). The benchmark sets those caps, and M_MMAP_MAX back to glibc's 65536:
  glibc's best case; a block above 32 MiB is mapped and unmapped at every use all the same.
- "keep": `keep_freed_memory()` (`transformer/cpu/malloc.py`), what `train.keep_freed_memory`
  applies to CPU training: no block is mapped on its own, no free memory is given back.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as `python benchmarks/cpu_malloc.py`, not with -m:
    # import from the repo root, and take benchmarks/ off sys.path before torch is imported
    # (its cuda.py would shadow NVIDIA's `cuda` package, which torch imports if present)
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [str(_HERE.parent), *(p for p in sys.path if p != str(_HERE))]

from transformer.config import load_config  # noqa: E402
from transformer.cpu.malloc import (  # noqa: E402
    M_MMAP_MAX,
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    keep_freed_memory,
    mallopt,
)
from transformer.train.trainer import Trainer  # noqa: E402

MiB = 2**20
# glibc's malloc after its dynamic thresholds have risen to their caps (see the module doc).
GLIBC_CAPS = {M_MMAP_MAX: 65536, M_MMAP_THRESHOLD: 32 * MiB, M_TRIM_THRESHOLD: 64 * MiB}
NO_REQUESTS = [False, False, False]  # an update's stop / save / signal flags (trainer.py)


def glibc_caps() -> bool:
    """Set `GLIBC_CAPS`; False where this is not glibc."""
    return all([mallopt(param, value) for param, value in GLIBC_CAPS.items()])


SETTINGS = {"glibc": glibc_caps, "keep": keep_freed_memory}


def machine_cpu_seconds() -> float | None:
    """CPU seconds all processes of the machine have spent so far (/proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # less idle, iowait


def timed_updates(trainer: Trainer, block: list) -> dict[str, float]:
    """Train on `block` (a list of updates' micro-batches); wall, CPU and fault counts."""
    before, machine = resource.getrusage(resource.RUSAGE_SELF), machine_cpu_seconds()
    start = time.perf_counter()
    for micro_batches in block:
        trainer.update(micro_batches, NO_REQUESTS)
    wall = time.perf_counter() - start
    after, machine_after = resource.getrusage(resource.RUSAGE_SELF), machine_cpu_seconds()
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    others = None
    if machine is not None and machine_after is not None:
        others = max(0.0, (machine_after - machine - user - system) / (wall * os.cpu_count()))
    return {
        "tokens_per_second": sum(b.n_tgt_tokens for mb in block for b in mb) / wall,
        "faults": (after.ru_minflt - before.ru_minflt) / len(block),
        "user": user / len(block),
        "sys": system / len(block),
        "others": others,
    }


def run(
    config_path: str, overrides: list[str], threads: int, rounds: int, updates: int, warmup: int
) -> dict[str, list[dict]]:
    """Measure both settings; returns each setting's per-round figures (`timed_updates`)."""
    if not glibc_caps():
        raise RuntimeError("this process's C library is not glibc: nothing to compare")
    results: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    with tempfile.TemporaryDirectory(prefix="cpu_malloc_") as run_dir:
        fixed = [f"train.output_dir={run_dir}", f"train.num_threads={threads}"]
        fixed += ["data.valid=null", "train.keep_freed_memory=false"]
        trainer = Trainer(load_config(config_path, [*overrides, *fixed]), resume=False, log=print)
        with trainer.batches:
            stream = iter(trainer.batches)
            for _ in range(warmup):
                trainer.update(next(stream), NO_REQUESTS)
            for round_ in range(rounds):
                block = [next(stream) for _ in range(updates + 1)]
                names = list(SETTINGS) if round_ % 2 == 0 else list(SETTINGS)[::-1]
                for name in names:
                    SETTINGS[name]()
                    trainer.update(block[0], NO_REQUESTS)  # the switch's update, untimed
                    results[name].append(timed_updates(trainer, block[1:]))
                rates = [f"{n} {results[n][-1]['tokens_per_second']:.0f}" for n in names]
                print(f"round {round_ + 1}/{rounds}: target tok/s {', '.join(rates)}", flush=True)
    return results


def report(results: dict[str, list[dict]]) -> str:
    """The table of medians (per setting) that `main` prints."""
    lines = [
        f"{'setting':<8} {'target tok/s (median, min-max)':>32} {'faults/update':>14} "
        f"{'user s/update':>14} {'sys s/update':>13} {'others%':>8}"
    ]
    for name, rows in results.items():
        tps = [r["tokens_per_second"] for r in rows]
        med = {key: statistics.median(r[key] for r in rows) for key in ("faults", "user", "sys")}
        others = [r["others"] for r in rows if r["others"] is not None]
        busy = f"{100 * statistics.median(others):.0f}" if others else "n/a"
        span = f"{statistics.median(tps):.0f} ({min(tps):.0f}-{max(tps):.0f})"
        lines.append(
            f"{name:<8} {span:>32} {med['faults']:>14.0f} {med['user']:>14.3f} "
            f"{med['sys']:>13.3f} {busy:>8}"
        )
    glibc, keep = (results[name] for name in SETTINGS)
    ratios = [
        k["tokens_per_second"] / g["tokens_per_second"] for g, k in zip(glibc, keep, strict=True)
    ]
    lines.append(
        f"keep / glibc, round by round (the same batches): median {statistics.median(ratios):.3f}"
        f" ({min(ratios):.3f}-{max(ratios):.3f}), keep faster in {sum(r > 1 for r in ratios)}"
        f" of {len(ratios)} rounds"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/multi30k.yaml")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=8, help="rounds (both settings each)")
    parser.add_argument("--updates", type=int, default=5, help="timed updates per setting/round")
    parser.add_argument("--warmup", type=int, default=5, help="untimed updates first")
    parser.add_argument("overrides", nargs="*", help="config overrides (section.key=value)")
    args = parser.parse_args(argv)
    try:
        results = run(
            args.config, args.overrides, args.threads, args.rounds, args.updates, args.warmup
        )
    except RuntimeError as error:
        print(f"cpu_malloc: {error}")
        return 1
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
