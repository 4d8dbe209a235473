"""A training job of two processes under transformer/cli/torchrun.py, stopped by a signal:
what the user reads is one line per fact, not one per process or from torchrun's logger."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.fixtures.runs import TinyRun
from transformer.checkpoint import read_checkpoint


def test_a_sigterm_to_a_two_process_job_says_each_thing_once(tmp_path, tiny_run):
    """It was seven: "SIGTERM: stopping after this update" from each process, and three
    warnings of torchrun's agent ("Received 15 death signal", "Sending process N closing
    signal SIGTERM" twice) above the saved checkpoint's line and the launcher's."""
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "transformer.cli.torchrun", "--standalone"]
    command += ["--nproc_per_node=2", "-m", "transformer.train"]
    command += ["--config", str(TinyRun.config_path), *TinyRun.fast]
    command += ["train.max_steps=1000", "train.save_interval_steps=1000"]
    env = dict(os.environ, TRANSFORMER_DATA_DIR=str(tiny_run.shared_data), OMP_NUM_THREADS="1")
    process = subprocess.Popen(
        [*command, f"train.output_dir={run_dir}"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    metrics = run_dir / "metrics.jsonl"
    deadline = time.monotonic() + 180
    while not (metrics.is_file() and metrics.read_text().count("\n") >= 3):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 143, err[-2000:]
    step = read_checkpoint(run_dir / "checkpoint_last.pt")["step"]
    assert err[err.index("SIGTERM") :].splitlines() == [
        "SIGTERM: stopping after this update",
        "torchrun: SIGTERM: passed on to the processes, which have stopped",
    ]
    saved = f"SIGTERM: stopped after step {step}, {run_dir / 'checkpoint_last.pt'} written; "
    assert out.count("stopped after step") == 1
    assert saved + "rerun the same command to resume" in out


def test_a_config_mistake_in_a_two_process_job_is_said_once(tmp_path, tiny_run):
    """Each process printed the usage line and the error: rank 0 alone says it now."""
    command = [sys.executable, "-m", "transformer.cli.torchrun", "--standalone"]
    command += ["--nproc_per_node=2", "-m", "transformer.train"]
    command += ["--config", str(TinyRun.config_path), "model.d_modl=64"]
    env = dict(os.environ, TRANSFORMER_DATA_DIR=str(tiny_run.shared_data), OMP_NUM_THREADS="1")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "d_modl" in errors[0], done.stderr[-2000:]
    assert done.stderr.count("usage: transformer-train") == 1
