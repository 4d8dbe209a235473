"""transformer/cli/torchrun.py: torchrun's signal and failure endings as one line each.

Each test starts the real launcher (`torch.distributed.run`) with one small worker script.
"""

from __future__ import annotations

import os
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
    assert err.strip().splitlines()[-1] == (
        f"torchrun: {name}: passed on to the processes, which have stopped"
    )
