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

While the command's module loads, a Ctrl-C or SIGTERM is recorded, not raised: raised, it could
land in an import that torch's C code makes (numpy's) and be dropped there, and the command
would then run to its end. Once loaded, the command ends in one line instead of starting.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

# The exit status after a signal recorded while the command loads: 128 + the signal, as the
# commands end after one (`PROG: interrupted`, transformer/cli/common.py).
STATUSES = {signal.SIGINT: 130, signal.SIGTERM: 143}


def start(command: str, argv: list[str] | None = None) -> int:
    """Set `OMP_WAIT_POLICY=PASSIVE` unless the environment sets it, then run a command.

    Args:
        command: The module of `transformer.cli` whose `main(argv)` is the command ("train").
        argv: Its arguments (None: `sys.argv[1:]`).

    Returns:
        The command's exit status (130 after a Ctrl-C, 143 after SIGTERM, while its module
        loads).
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        with recorded_signals() as received:
            module = importlib.import_module(f"transformer.cli.{command}")
    except KeyboardInterrupt:  # Ctrl-C while torch loads, where it could not be recorded
        received = [signal.SIGINT]
    if received:
        return interrupted(f"transformer-{command}", received[0])
    return module.main(argv)


def interrupted(prog: str, signum: int) -> int:
    """End a command that a signal stopped while it loaded: nothing has started, one line.

    Every command's rule (this module's `start`, transformer/cli/torchrun.py,
    scripts/quickstart.py), after `recorded_signals` recorded a Ctrl-C or SIGTERM.

    Args:
        prog: The command's name, as its messages start ("transformer-train").
        signum: The first signal recorded, SIGINT or SIGTERM.

    Returns:
        The exit status: 128 + the signal (`STATUSES`).
    """
    print(f"{prog}: interrupted", file=sys.stderr)
    return STATUSES[signum]


@contextlib.contextmanager
def recorded_signals() -> Iterator[list[int]]:
    """Record SIGINT and SIGTERM in the yielded list instead of acting on them, for a while.

    Only signals left at Python's defaults are recorded (an ignored one stays ignored, as in a
    background job), and only in the main thread, the one that receives them. The caller ends
    after one with `interrupted`.

    Yields:
        The signals received meanwhile, in order.
    """
    received: list[int] = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in STATUSES:
            if signal.getsignal(signum) in (signal.default_int_handler, signal.SIG_DFL):
                previous[signum] = signal.signal(signum, lambda s, frame: received.append(s))
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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
