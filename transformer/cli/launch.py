"""The console scripts' entry points: each sets the OpenMP wait policy, then runs its command.

torch's CPU threads come from libgomp, which by default spins a waiting thread for a while
before it sleeps. Alone on a machine that costs nothing; beside another job (a training run on
the same cores, say) the spinning threads take the cores the working ones need, and a command
with two threads runs many times slower (BENCHMARKS.md, "CPU training: kernel time" and
"Decoding beside a training run"). `OMP_WAIT_POLICY=PASSIVE` makes a waiting thread sleep at
once. libgomp reads the variable once, when torch loads, so it is set here, before the command's
module (and torch) is imported; a value in the environment wins. `python -m transformer
<command>` comes here too (transformer/__main__.py); `python -m transformer.cli.<command>` skips
this: set the variable yourself there, and a Ctrl-C while torch loads is a traceback.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys


def start(command: str, argv: list[str] | None = None) -> int:
    """Set `OMP_WAIT_POLICY=PASSIVE` unless the environment sets it, then run a command.

    Args:
        command: The module of `transformer.cli` whose `main(argv)` is the command ("train").
        argv: Its arguments (None: `sys.argv[1:]`).

    Returns:
        The command's exit status (130 after a Ctrl-C while its module loads).
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        module = importlib.import_module(f"transformer.cli.{command}")
    except KeyboardInterrupt:  # Ctrl-C while torch loads (a second or two): no traceback
        print(f"transformer-{command}: interrupted", file=sys.stderr)
        return 130
    return module.main(argv)


# The commands, as `python -m transformer <command>` names them (transformer/__main__.py).
COMMANDS = (
    "prepare", "train", "average", "translate", "evaluate", "score", "attention", "plot", "export",
)  # fmt: skip

# The entry points of pyproject.toml's [project.scripts], one per command: `f(argv=None)`.
train = functools.partial(start, "train")
prepare = functools.partial(start, "prepare")
average = functools.partial(start, "average")
attention = functools.partial(start, "attention")
plot = functools.partial(start, "plot")
translate = functools.partial(start, "translate")
evaluate = functools.partial(start, "evaluate")
score = functools.partial(start, "score")
export = functools.partial(start, "export")
