"""torchrun as `make demo` starts it: the same launcher, with one line instead of a traceback.

    python -m transformer.cli.torchrun --standalone --nproc_per_node 2 -m transformer.cli.train ...

takes torchrun's arguments (`torch.distributed.run`, PyTorch's launcher) and runs it unchanged.
Only its ending differs. torchrun itself answers a Ctrl-C or a SIGTERM by passing the signal
on to its processes, which finish their update and save (`transformer/train/interrupt.py`), and
then raises `SignalException`: a traceback after the processes' own one-line messages. When a
process fails, it prints a `ChildFailedError` report of some 20 lines below that process's
own error. Here both end in one line and the usual exit status: 128 + the signal (130 for
Ctrl-C, 143 for SIGTERM), or the failed process's status; torchrun's warnings that it is
stopping its processes are left out (`quiet_shutdown_warnings`).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import re
import signal
import sys
from collections.abc import Iterator

from transformer.cli.launch import interrupted, recorded_signals

PROG = "torchrun"
# A process loads torch (some 300 MB) before it does anything: beyond a few per core, a typing
# slip (--nproc_per_node 2000) is refused before it fills the memory.
MAX_PROCESSES_PER_CORE = 4
# torchrun's loggers of the agent and of its processes, and their messages about stopping the
# processes after a signal or a failure (`quiet_shutdown_warnings`).
SHUTDOWN_LOGGERS = (
    "torch.distributed.elastic.agent.server.api",
    "torch.distributed.elastic.multiprocessing.api",
)
SHUTDOWN_WARNING = re.compile(
    r"Received \S+ death signal|Sending process \d+ closing signal|failed \(exitcode: -?\d+\) local"
)


def main(argv: list[str] | None = None) -> int:
    """Run torchrun with `argv` (None: `sys.argv[1:]`).

    Args:
        argv: torchrun's command line (`--nproc_per_node N ... -m module args`).

    Returns:
        0; 2 for a wrong command line (one line); 128 + the signal's number after a signal
        (also while torch loads, or a Ctrl-C before the processes start); the first failed
        process's exit status (1 when it was killed by a signal of its own).
    """
    # Imported here, so that `--help` of the other commands never pays for torch; a Ctrl-C or
    # SIGTERM meanwhile is recorded (torch's C code could drop a KeyboardInterrupt, and the
    # whole training would then run): nothing has started, one line.
    with recorded_signals() as received:
        from torch.distributed import run as torchrun
        from torch.distributed.elastic.multiprocessing.api import SignalException
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    if received:
        return interrupted(PROG, received[0])
    parser = torchrun.get_args_parser()
    parser.prog = PROG  # not the file's name, torchrun.py
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)  # argparse: exit 2
    try:  # the launch settings torchrun derives from them, on a copy, before any process
        check_counts(args.nnodes, args.nproc_per_node, standalone=args.standalone)
        torchrun.config_from_args(copy.deepcopy(args))
    except (ValueError, AssertionError) as error:  # e.g. --max-restarts -1
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    try:
        with quiet_shutdown_warnings():
            torchrun.run(args)
    except KeyboardInterrupt:  # during the rendezvous, before torchrun handles signals itself
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except SignalException as error:
        name = signal.Signals(error.sigval).name
        print(f"{PROG}: {name}: passed on to the processes, which have stopped", file=sys.stderr)
        return 128 + int(error.sigval)
    except ChildFailedError as error:
        rank, failure = error.get_first_failure()
        print(
            f"{PROG}: the process of rank {rank} exited with status {failure.exitcode} "
            "(its own message is above)",
            file=sys.stderr,
        )
        return failure.exitcode if failure.exitcode > 0 else 1
    return 0


@contextlib.contextmanager
def quiet_shutdown_warnings() -> Iterator[None]:
    """Within the block, torchrun's messages that it is stopping its processes are dropped.

    After a signal torchrun's agent logs "Received 15 death signal, shutting down workers"
    and "Sending process N closing signal SIGTERM" for each process, three lines above the
    processes' own one-line message and `main`'s; after a failure, "failed (exitcode: 2)
    local_rank: 0 (pid: N) of binary: ...", which `main`'s line says again. Only those
    messages are dropped; torchrun's other warnings and errors stay.

    Source: `torch.distributed.elastic.agent.server.api` and `...multiprocessing.api` log
    them on their module loggers; a logger's filters see the records logged on it (Python's
    `logging`).
    """
    loggers = [logging.getLogger(name) for name in SHUTDOWN_LOGGERS]
    for logger in loggers:
        logger.addFilter(_not_a_shutdown_warning)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(_not_a_shutdown_warning)


def _not_a_shutdown_warning(record: logging.LogRecord) -> bool:
    """False for torchrun's messages about stopping its processes (`SHUTDOWN_WARNING`)."""
    return not SHUTDOWN_WARNING.match(record.getMessage())


def check_counts(nnodes: str, nproc_per_node: str, standalone: bool = False) -> None:
    """Check the two counts torchrun takes as text and converts itself, naming the flag.

    torchrun's own `int` of --nnodes printed Python's message ("invalid literal for int()"),
    a traceback for "1:2:3", and took " 2" or non-ASCII digits; --nproc_per_node 0 or -1
    ended in an AssertionError traceback once the launch began. `--standalone --nnodes 2`
    waited 600 s for a node that cannot join, then printed a traceback (1:2 waited 30 s); a
    --nproc_per_node of thousands started processes until the memory ran out.

    Args:
        nnodes: --nnodes: N or MIN:MAX.
        nproc_per_node: --nproc_per_node: a number, or a device word (auto, cpu, gpu, ...)
            that torchrun itself checks.
        standalone: --standalone: this machine is the only node.

    Raises:
        ValueError: naming the flag and its value, for a count that is not a positive integer
            of ASCII digits, a MIN above MAX, a MAX above 1 with --standalone, or more than
            `MAX_PROCESSES_PER_CORE` processes per CPU core this process may use.
    """
    counts = nnodes.split(":")
    if len(counts) > 2 or not all(map(_is_count, counts)) or int(counts[0]) > int(counts[-1]):
        raise ValueError(
            f"--nnodes {nnodes!r}: expected N or MIN:MAX, positive integers with MIN <= MAX"
        )
    if standalone and int(counts[-1]) > 1:
        raise ValueError(
            f"--nnodes {nnodes!r}: --standalone is this machine alone, one node; the others "
            "would never join (leave out --standalone and give --rdzv-endpoint for several)"
        )
    try:
        int(nproc_per_node)
    except ValueError:
        return  # a device word: torchrun names a wrong one itself
    if not _is_count(nproc_per_node):
        raise ValueError(
            f"--nproc_per_node {nproc_per_node!r}: expected a positive integer or auto, cpu, gpu"
        )
    problem = too_many_processes(int(nproc_per_node))
    if problem:
        raise ValueError(f"--nproc_per_node {nproc_per_node!r}: {problem}")


def too_many_processes(count: int) -> str | None:
    """Why `count` processes are too many for this machine, or None when they are not.

    The limit, `MAX_PROCESSES_PER_CORE` per CPU core this process may use, holds for
    --nproc_per_node here and for the quickstart's --processes.
    """
    cores = len(os.sched_getaffinity(0))
    if count <= MAX_PROCESSES_PER_CORE * cores:
        return None
    return (
        f"more than {MAX_PROCESSES_PER_CORE} processes per CPU core ({cores} here): each loads "
        "torch; one per GPU or core is usual"
    )


def _is_count(text: str) -> bool:
    """Whether `text` is a positive integer written in ASCII digits only."""
    return text.isascii() and text.isdigit() and int(text) > 0


if __name__ == "__main__":
    sys.exit(main())
