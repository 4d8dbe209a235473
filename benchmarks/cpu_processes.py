"""Train a config on the CPU in one process with N threads and in N processes with one thread.

    python benchmarks/cpu_processes.py [--config configs/multi30k.yaml] [--cores 2] [--rounds 2]
    python -m benchmarks.cpu_processes [--config configs/multi30k.yaml] [--cores 2] [--rounds 2]

What `make demo` chooses between (`scripts/quickstart.py`, `cpu_processes`): each round runs
`transformer.cli.train` on the config's real training data for `--updates` updates twice, in a
fresh run directory each time:

- "threads": one process, `train.num_threads=N` (what `transformer-train` alone does);
- "processes": `torch.distributed.run --standalone --nproc_per_node N`, `train.num_threads=1`
  each (torch.distributed with gloo; the gradients are averaged by an all-reduce every update).

The order alternates round by round, so that the load of other processes falls on both alike.
The config must set `train.tokens_per_update`, so that both runs train on updates of the same
size (one micro-batch of 4096 tokens, or N of 4096 / N). The figure of a run is the median of
the target tokens per second that training logs every `train.log_interval_steps` updates
(`metrics.jsonl`), without the first interval (start-up); data preparation is not timed.
Prints each run's figure, then the ratio processes / threads round by round and its median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = ("threads", "processes")


def run_overrides(run_dir: Path, updates: int) -> list[str]:
    """A timed run's overrides: `updates` updates into `run_dir`, no validation or checkpoints."""
    return [
        f"train.output_dir={run_dir}",
        f"train.max_steps={updates}",
        "train.max_minutes=null",
        "train.log_interval_steps=25",
        "train.validate_interval_steps=0",
        "train.save_interval_steps=0",
    ]


def command(setting: str, cores: int, config: str, run_dir: Path, updates: int) -> list[str]:
    """The training command of one setting (see the module doc)."""
    overrides = run_overrides(run_dir, updates)
    if setting == "threads":
        return [
            sys.executable, "-m", "transformer.cli.train", "--config", config,
            *overrides, f"train.num_threads={cores}",
        ]  # fmt: skip
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc_per_node={cores}", "-m", "transformer.cli.train", "--config", config,
        *overrides, "train.num_threads=1",
    ]  # fmt: skip


def logged_rate(metrics: Path) -> float:
    """Median target tokens/s of a run's training records, without the first one (start-up).

    Raises:
        ValueError: if the run logged fewer than two training records.
    """
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    rates = [r["tokens_per_second"] for r in records if r.get("type") == "train"]
    if len(rates) < 2:
        raise ValueError(f"{metrics}: {len(rates)} training record(s); raise --updates")
    return statistics.median(rates[1:])


def main(argv: list[str] | None = None) -> int:
    """Run the rounds and print the figures; returns 0, or 1 when a run fails."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "multi30k.yaml"))
    parser.add_argument("--cores", type=int, default=2, help="threads of one, or processes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--updates", type=int, default=100, help="updates per run")
    args = parser.parse_args(argv)
    if args.cores < 2 or args.rounds < 1 or args.updates < 50:
        parser.error("--cores must be at least 2, --rounds at least 1, --updates at least 50")
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    rates = {setting: [] for setting in SETTINGS}
    with tempfile.TemporaryDirectory(prefix="cpu_processes_") as scratch:
        for round_index in range(args.rounds):
            order = SETTINGS if round_index % 2 == 0 else SETTINGS[::-1]
            for setting in order:
                run_dir = Path(scratch) / f"{setting}-{round_index}"
                argv_ = command(setting, args.cores, args.config, run_dir, args.updates)
                done = subprocess.run(argv_, cwd=ROOT, env=env, capture_output=True, text=True)
                if done.returncode != 0:
                    print(done.stderr[-2000:], file=sys.stderr)
                    print(f"cpu_processes: the {setting} run failed", file=sys.stderr)
                    return 1
                rates[setting].append(logged_rate(run_dir / "metrics.jsonl"))
                rate = rates[setting][-1]
                print(
                    f"round {round_index + 1}/{args.rounds}: {setting:<9} {rate:.0f} target tok/s"
                )
    ratios = [p / t for p, t in zip(rates["processes"], rates["threads"], strict=True)]
    print(f"one process x {args.cores} threads: median {statistics.median(rates['threads']):.0f}")
    print(f"{args.cores} processes x 1 thread: median {statistics.median(rates['processes']):.0f}")
    print(
        f"processes / threads, round by round: median {statistics.median(ratios):.3f} "
        f"({min(ratios):.3f}-{max(ratios):.3f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
