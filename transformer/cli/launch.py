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


def start(command: str) -> int:
    """Set `OMP_WAIT_POLICY=PASSIVE` unless the environment sets it, then run a command.

    Args:
        command: The module of `transformer.cli` whose `main()` is the command ("train").

    Returns:
        The command's exit status.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return importlib.import_module(f"transformer.cli.{command}").main()


def train() -> int:
    """`transformer-train`."""
    return start("train")


def prepare() -> int:
    """`transformer-prepare`."""
    return start("prepare")


def average() -> int:
    """`transformer-average`."""
    return start("average")


def attention() -> int:
    """`transformer-attention`."""
    return start("attention")


def plot() -> int:
    """`transformer-plot`."""
    return start("plot")


def translate() -> int:
    """`transformer-translate`."""
    return start("translate")


def evaluate() -> int:
    """`transformer-evaluate`."""
    return start("evaluate")


def score() -> int:
    """`transformer-score`."""
    return start("score")


def export() -> int:
    """`transformer-export`."""
    return start("export")
