"""One step of a job (the quickstart's training, averaging, decoding) as a subprocess: echoed,
with passive OpenMP threads, and stopped cleanly by one Ctrl-C or SIGTERM; the training step's
command."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Exit status after Ctrl-C or SIGTERM, once the running step has stopped cleanly (as the CLIs).
INTERRUPTED = 130


def training_command(python: str, processes: int, arguments: list[str]) -> list[str]:
    """The training step: `transformer.train` with `arguments`, under torchrun for several
    processes.

    Args:
        python: The interpreter.
        processes: Training processes; above 1, one machine's under torchrun (`--standalone`,
            a rendezvous on a free local port; README, "Training on GPUs").
        arguments: `transformer-train`'s arguments.

    Returns:
        The command (`transformer-train`'s entry point: a Ctrl-C while torch loads is one line).
    """
    train = ["-m", "transformer.train", *arguments]
    if processes == 1:
        return [python, *train]
    # torchrun itself, ending in one line instead of a traceback (transformer/cli/torchrun.py).
    launcher = ["-m", "transformer.cli.torchrun", "--standalone", f"--nproc_per_node={processes}"]
    return [python, *launcher, *train]


def run(
    command: list[str], again: str = "the same command", env: dict[str, str] | None = None
) -> None:
    """Echo and run a command; exit with its status if it fails (after an interruption: one
    line, "rerun `again` to resume").

    Its OpenMP threads sleep at once when they wait (`OMP_WAIT_POLICY=PASSIVE`, unless the
    environment sets it): spinning threads slow a multi-threaded run many times over when
    another job takes a core, and cost nothing measurable alone (BENCHMARKS.md, "CPU
    training: kernel time"). libgomp reads it when torch starts, so it goes in the
    subprocess's environment.

    Args:
        command: The program and its arguments.
        again: What the interruption line tells the user to rerun.
        env: More environment variables for the step, echoed before the command; as
            with `OMP_WAIT_POLICY`, a variable the user's environment sets keeps its value.
    """
    added = {"OMP_WAIT_POLICY": "PASSIVE", **(env or {})}
    added = {name: value for name, value in added.items() if name not in os.environ}
    env = {**os.environ, **added}
    shown = "".join(f"{name}={value} " for name, value in added.items())
    print("+ " + shown + shlex.join(command), flush=True)
    # The step runs in a process group of its own, and every Ctrl-C or SIGTERM the quickstart
    # gets is passed on to it exactly once: a terminal's Ctrl-C (sent to the foreground group)
    # and a `kill PID` of the quickstart alone (what a supervisor sends) stop it the same way,
    # and a second Ctrl-C still means "abort at once" to the step (to all of its processes).
    group = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
    process = subprocess.Popen(command, cwd=REPO, env=env, **group)
    received = []

    def forward(signum, frame):
        received.append(signum)
        if len(received) == 1:
            process.send_signal(signum)
            return
        # A second one goes to the step's whole group: under torchrun, the launcher passed the
        # first on to its processes once, and the second Ctrl-C must reach them too (abort).
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:  # the step has already ended
            pass

    passed_on = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, forward) for signum in passed_on}
    try:
        status = process.wait()  # retried after each forwarded signal (PEP 475)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    interrupted = bool(received)
    if interrupted or status in (130, 143):  # Ctrl-C or SIGTERM: the step stopped cleanly
        print(f"quickstart: interrupted; rerun {again} to resume", file=sys.stderr)
        # 128 + the signal the quickstart received (130, 143), else the step's own status
        sys.exit(128 + received[0] if received else status)
    if status != 0:
        sys.exit(f"quickstart: command failed with exit status {status}: {shlex.join(command)}")
