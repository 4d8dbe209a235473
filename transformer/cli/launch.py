"""The console scripts' entry points: each sets the OpenMP wait policy, then runs its command.

torch's CPU threads come from libgomp, which by default spins a waiting thread for a while
before it sleeps. Alone on a machine that costs nothing; beside another job (a training run on
the same cores, say) the spinning threads take the cores the working ones need, and a command
with two threads runs many times slower (BENCHMARKS.md, "CPU training: kernel time" and
"Decoding beside a training run"). `OMP_WAIT_POLICY=PASSIVE` makes a waiting thread sleep at
once. libgomp reads the variable once, when torch loads, so it is set here, before the command's
module (and torch) is imported; a value in the environment wins. `python -m
transformer.cli.<command>` skips this: set the variable yourself there.
"""

from __future__ import annotations

import importlib
import os


def start(command: str, argv: list[str] | None = None) -> int:
    """Set `OMP_WAIT_POLICY=PASSIVE` unless the environment sets it, then run a command.

    Args:
        command: The module of `transformer.cli` whose `main(argv)` is the command ("train").
        argv: Its arguments (None: `sys.argv[1:]`).

    Returns:
        The command's exit status.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return importlib.import_module(f"transformer.cli.{command}").main(argv)


def train(argv: list[str] | None = None) -> int:
    """`transformer-train` (`argv`: as `main`)."""
    return start("train", argv)


def prepare(argv: list[str] | None = None) -> int:
    """`transformer-prepare` (`argv`: as `main`)."""
    return start("prepare", argv)


def average(argv: list[str] | None = None) -> int:
    """`transformer-average` (`argv`: as `main`)."""
    return start("average", argv)


def attention(argv: list[str] | None = None) -> int:
    """`transformer-attention` (`argv`: as `main`)."""
    return start("attention", argv)


def plot(argv: list[str] | None = None) -> int:
    """`transformer-plot` (`argv`: as `main`)."""
    return start("plot", argv)


def translate(argv: list[str] | None = None) -> int:
    """`transformer-translate` (`argv`: as `main`)."""
    return start("translate", argv)


def evaluate(argv: list[str] | None = None) -> int:
    """`transformer-evaluate` (`argv`: as `main`)."""
    return start("evaluate", argv)


def score(argv: list[str] | None = None) -> int:
    """`transformer-score` (`argv`: as `main`)."""
    return start("score", argv)


def export(argv: list[str] | None = None) -> int:
    """`transformer-export` (`argv`: as `main`)."""
    return start("export", argv)
