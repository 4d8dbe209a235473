"""The demo's training processes over several epochs: before and after two process settings.

    python benchmarks/cpu_epochs.py [--config configs/multi30k.yaml] [--cores 2] [--rounds 2]
        [--updates 300] [--settings before,no-trim,after]
    python -m benchmarks.cpu_epochs [the same options]

Each round trains `--updates` updates of the config the way `make demo` does on a CPU
(`torch.distributed.run`, `--cores` processes of one thread each; the real training data, no
validation, no checkpoints), once per setting, in a fresh run directory each time:

- "before": the trainer as it was until 2026-12-05: oneDNN's primitive cache at its default
  capacity (1024) and a `malloc_trim` after each epoch plan although the heap is kept
  (`transformer.data.heap`, put back by a small launcher this script writes);
- "no-trim": oneDNN's default capacity, no trim (what the trainer does now about the heap);
- "after": the trainer as it is (`transformer.cpu.primitive_cache`, `transformer.data.heap`).

The settings alternate in order round by round, so the load of other processes falls on all
alike. A Multi30k epoch of the demo is about 115 updates per process: 300 updates hold the
trims of two epochs and the second epoch's shapes, which a large enough cache has seen
before. The figure of a run is the median target tokens per second of its training records
without the first one (`benchmarks/cpu_processes.py`); each run's user and system CPU seconds
(its processes, `os.wait4`) show where the time went. Prints each run, then every setting's
median and its ratio to "before", round by round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as `python benchmarks/cpu_epochs.py`, not with -m:
    # import from the repo root, and take benchmarks/ off sys.path (benchmarks/cpu_malloc.py)
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [str(_HERE.parent), *(p for p in sys.path if p != str(_HERE))]

from benchmarks.cpu_processes import ROOT, logged_rate, run_overrides  # noqa: E402

SETTINGS = ("before", "no-trim", "after")

# The "before" launcher: the trainer's process with the epoch trim back (see the module doc).
TRIMMING_LAUNCHER = """
import sys
import transformer.data.heap as heap
heap.freed_memory_kept = lambda: False  # trim after each epoch plan, as before 2026-12-05
from transformer.cli.train import main
sys.exit(main(sys.argv[1:]))
"""


def command(setting: str, cores: int, config: str, run_dir: Path, updates: int) -> list[str]:
    """The training command of one setting; "before" runs `TRIMMING_LAUNCHER` in `run_dir`."""
    overrides = [*run_overrides(run_dir, updates), "train.num_threads=1"]
    launcher = ["-m", "transformer.cli.train"]
    if setting == "before":
        launcher = [str(run_dir.parent / f"trimming_launcher_{run_dir.name}.py")]
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc_per_node={cores}", *launcher, "--config", config, *overrides,
    ]  # fmt: skip


def environment(setting: str) -> dict[str, str]:
    """The run's environment: oneDNN's default capacity unless "after"; OMP's passive wait."""
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    for name in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "DNNL_PRIMITIVE_CACHE_CAPACITY"):
        env.pop(name, None)
    if setting != "after":
        env["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = "1024"  # oneDNN's default, the user's choice
    return env


def run(setting: str, args: argparse.Namespace, run_dir: Path) -> tuple[float, float, float]:
    """Train one run; returns (target tok/s, user CPU s, system CPU s).

    Raises:
        RuntimeError: the run failed (its last output in the message).
    """
    if setting == "before":
        (run_dir.parent / f"trimming_launcher_{run_dir.name}.py").write_text(TRIMMING_LAUNCHER)
    argv = command(setting, args.cores, args.config, run_dir, args.updates)
    with open(run_dir.parent / f"{run_dir.name}.log", "w") as log:
        process = subprocess.Popen(argv, cwd=ROOT, env=environment(setting), stdout=log, stderr=log)
        _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        tail = (run_dir.parent / f"{run_dir.name}.log").read_text()[-2000:]
        raise RuntimeError(f"the {setting} run failed:\n{tail}")
    return logged_rate(run_dir / "metrics.jsonl"), usage.ru_utime, usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    """Run the rounds and print the figures; returns 0, or 1 when a run fails."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "multi30k.yaml"))
    parser.add_argument("--cores", type=int, default=2, help="training processes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--updates", type=int, default=300, help="updates per run")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated")
    args = parser.parse_args(argv)
    settings = args.settings.split(",")
    if args.cores < 1 or args.rounds < 1 or args.updates < 50:
        parser.error("--cores and --rounds must be at least 1, --updates at least 50")
    if "before" not in settings or not set(settings) <= set(SETTINGS):
        parser.error(f"--settings: 'before' and any of {', '.join(SETTINGS[1:])}")
    rates = {setting: [] for setting in settings}
    with tempfile.TemporaryDirectory(prefix="cpu_epochs_") as scratch:
        for round_index in range(args.rounds):
            shift = round_index % len(settings)
            for setting in settings[shift:] + settings[:shift]:
                try:
                    rate, user, system = run(
                        setting, args, Path(scratch) / f"{setting}-{round_index}"
                    )
                except RuntimeError as error:
                    print(f"cpu_epochs: {error}", file=sys.stderr)
                    return 1
                rates[setting].append(rate)
                share = system / (user + system)
                print(
                    f"round {round_index + 1}/{args.rounds}: {setting:<8} {rate:.0f} target "
                    f"tok/s, user {user:.0f} s, system {system:.0f} s ({share:.0%})"
                )
    for setting in settings:
        ratios = [a / b for a, b in zip(rates[setting], rates["before"], strict=True)]
        spread = f"{min(ratios):.3f}-{max(ratios):.3f}"
        print(
            f"{setting:<8} median {statistics.median(rates[setting]):.0f} target tok/s; / before, "
            f"round by round: median {statistics.median(ratios):.3f} ({spread})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
