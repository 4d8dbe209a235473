"""transformer/cli/torchrun.py: torchrun's signal and failure endings as one line each.

Each test starts the real launcher (`torch.distributed.run`) with one small worker script.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

WORKER = """
import signal, sys, time
def stop(signum, frame):
    print("worker: stopping", flush=True)
    sys.exit(128 + signum)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
if sys.argv[1] == "fail":
    print("worker: error: something the worker says itself", file=sys.stderr)
    sys.exit(3)
print("worker: started", flush=True)
time.sleep(60)
"""


def _launch(tmp_path, mode: str) -> subprocess.Popen:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    command = [sys.executable, "-m", "transformer.cli.torchrun", "--standalone"]
    command += ["--nproc_per_node=1", str(script), mode]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def test_a_failed_process_ends_in_one_line_with_its_status(tmp_path):
    process = _launch(tmp_path, "fail")
    out, err = process.communicate(timeout=120)
    assert process.returncode == 3
    assert "something the worker says itself" in err
    assert "Traceback" not in err and "ChildFailedError" not in err
    assert "failed (exitcode: 3)" not in err  # torchrun's error log, which the line says again
    assert err.strip().splitlines()[-1] == (
        "torchrun: the process of rank 0 exited with status 3 (its own message is above)"
    )


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_is_passed_on_and_ends_in_one_line(tmp_path, signum, status):
    process = _launch(tmp_path, "wait")
    assert process.stdout.readline().strip() == "worker: started"
    time.sleep(1)  # torchrun's monitor loop is running
    process.send_signal(signum)
    out, err = process.communicate(timeout=120)
    assert process.returncode == status
    assert "worker: stopping" in out  # the worker got the signal from torchrun
    assert "Traceback" not in err and "SignalException" not in err
    name = signal.Signals(signum).name
    # All of it: torchrun's agent also logged "Received 15 death signal, shutting down
    # workers" and "Sending process N closing signal SIGTERM" above.
    assert err.strip().splitlines() == [
        f"torchrun: {name}: passed on to the processes, which have stopped"
    ]


@pytest.mark.parametrize(
    "option, message",
    [
        (["--nnodes", "x"], "--nnodes 'x': expected N or MIN:MAX"),
        (["--nnodes", "1:2:3"], "--nnodes '1:2:3': expected N or MIN:MAX"),
        (["--nproc_per_node", "0"], "--nproc_per_node '0': expected a positive integer"),
        (["--max-restarts", "-1"], "max_restarts must be >= 0"),
    ],
)
def test_a_wrong_launch_setting_is_one_line_before_any_process(option, message):
    """`--nnodes x` ended in a 25-line ValueError traceback (#17, bad-input pass), then in
    Python's "invalid literal for int()" without the flag; `--nnodes 1:2:3` and
    `--nproc_per_node 0` still ended in a traceback, with status 1."""
    command = [sys.executable, "-m", "transformer.cli.torchrun", "--standalone", *option]
    done = subprocess.run(
        [*command, "-m", "json.tool"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("torchrun: error: ") and message in done.stderr


@pytest.mark.parametrize("nnodes", ["1.5", "", "2:1", "0", " 2", "\u0663", "+1"])
def test_node_counts_that_are_not_positive_ascii_integers_are_refused(nnodes):
    from transformer.cli.torchrun import check_counts

    with pytest.raises(ValueError, match=f"^--nnodes {re.escape(repr(nnodes))}: "):
        check_counts(nnodes, "1")
    check_counts("2", "auto")
    check_counts("1:3", "4")


@pytest.mark.parametrize("nproc", ["-1", " 2", "\u0663"])
def test_process_counts_that_are_not_positive_ascii_integers_are_refused(nproc):
    from transformer.cli.torchrun import check_counts

    with pytest.raises(ValueError, match=f"^--nproc_per_node {re.escape(repr(nproc))}: "):
        check_counts("1", nproc)


def test_standalone_with_several_nodes_and_thousands_of_processes_are_refused(monkeypatch):
    """`--standalone --nnodes 2` waited 600 s for a node that could not join; 2000 processes
    filled the memory."""
    from transformer.cli import torchrun

    with pytest.raises(ValueError, match=r"^--nnodes '2': --standalone is this machine alone"):
        torchrun.check_counts("2", "1", standalone=True)
    with pytest.raises(ValueError, match=r"^--nnodes '2:3': --standalone"):
        torchrun.check_counts("2:3", "1", standalone=True)
    with pytest.raises(ValueError, match=r"^--nnodes '1:2': --standalone"):
        torchrun.check_counts("1:2", "1", standalone=True)  # waited 30 s for the second
    torchrun.check_counts("1:1", "1", standalone=True)
    torchrun.check_counts("2", "1")  # nodes that meet at an endpoint
    monkeypatch.setattr(torchrun.os, "sched_getaffinity", lambda pid: {0, 1})
    limit = 2 * torchrun.MAX_PROCESSES_PER_CORE
    torchrun.check_counts("1", str(limit))
    with pytest.raises(
        ValueError, match=rf"^--nproc_per_node '{limit + 1}': more than .* \(2 here\)"
    ):
        torchrun.check_counts("1", str(limit + 1))


def test_argparse_errors_name_the_command(capsys):
    from transformer.cli import torchrun

    with pytest.raises(SystemExit) as stop:
        torchrun.main(["--max-restarts", "x", "worker.py"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "torchrun: error: argument --max-restarts/--max_restarts: invalid int value: 'x'"
    )


def test_a_ctrl_c_while_torch_loads_is_one_line(monkeypatch, capsys, foreground_signals):
    """A Ctrl-C in the second torchrun's import takes gave a KeyboardInterrupt traceback, or,
    landing in an import that torch's C code makes and drops it, none at all: the whole
    training then ran (#17, bad-input pass). The import here drops it as that code did."""
    import importlib.abc

    import torch.distributed

    from transformer.cli import torchrun

    class Interrupting(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "torch.distributed.run":
                try:
                    signal.raise_signal(signal.SIGINT)
                except KeyboardInterrupt:
                    pass  # dropped
            return None

    monkeypatch.delitem(sys.modules, "torch.distributed.run", raising=False)
    monkeypatch.delattr(torch.distributed, "run", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Interrupting(), *sys.meta_path])
    try:
        status = torchrun.main(["--nproc_per_node=1", "worker.py"])
    except KeyboardInterrupt:  # would end the whole test session
        pytest.fail("the KeyboardInterrupt escaped main()")
    assert status == 130
    assert capsys.readouterr().err == "torchrun: interrupted\n"


def test_a_ctrl_c_before_the_processes_start_is_one_line(monkeypatch, capsys):
    """A Ctrl-C during torchrun's rendezvous, before it handles signals itself, printed a
    KeyboardInterrupt traceback from `time.sleep` in `_delay` (#17, bad-input pass)."""
    from torch.distributed import run

    from transformer.cli import torchrun

    def rendezvous(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "run", rendezvous)
    assert torchrun.main(["--standalone", "--nproc_per_node=1", "worker.py"]) == 130
    assert capsys.readouterr().err == "torchrun: interrupted\n"
