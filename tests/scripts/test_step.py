"""Tests for scripts/step.py: the environment of a job's steps (their signals: in
test_quickstart.py, which runs whole steps)."""

from __future__ import annotations

import os
import signal
import sys
import threading

import pytest

from scripts import step


@pytest.mark.parametrize("given", [None, "ACTIVE"])
def test_steps_run_with_passive_openmp_threads_unless_set(given, monkeypatch, capsys):
    """The subprocess gets OMP_WAIT_POLICY=PASSIVE, and the user's own value wins."""
    env = _environment_of_a_step(monkeypatch, "OMP_WAIT_POLICY", given)
    assert env["OMP_WAIT_POLICY"] == (given or "PASSIVE")
    assert env["PATH"] == os.environ["PATH"]
    echoed = capsys.readouterr().out
    assert ("OMP_WAIT_POLICY=PASSIVE transformer-train" in echoed) == (given is None)


@pytest.mark.parametrize("given", [None, "2"])
def test_a_step_gets_the_environment_it_is_given_unless_the_user_set_it(given, monkeypatch, capsys):
    env = _environment_of_a_step(
        monkeypatch, "OMP_NUM_THREADS", given, env={"OMP_NUM_THREADS": "1"}
    )
    assert env["OMP_NUM_THREADS"] == (given or "1")
    echoed = capsys.readouterr().out
    assert ("OMP_NUM_THREADS=1 transformer-train" in echoed) == (given is None)


@pytest.mark.parametrize("env, warned", [(None, True), ({"OMP_NUM_THREADS": "1"}, False)])
def test_torchrun_warns_about_threads_only_when_they_are_not_set(env, warned, monkeypatch, capfd):
    """The warning the quickstart's environment avoids, from torchrun itself (two processes
    that run `true`)."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    command = [sys.executable, "-m", "transformer.cli.torchrun", "--standalone"]
    step.run([*command, "--nproc_per_node=2", "--no-python", "true"], env=env)
    assert ("Setting OMP_NUM_THREADS" in capfd.readouterr().err) == warned


def _environment_of_a_step(monkeypatch, name, given, **run_kwargs):
    """Run a step with `name` unset (`given` None) or set to `given` in the user's environment,
    Popen replaced; returns the environment the step got."""
    if given is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, given)
    seen = {}

    class FakePopen:
        def __init__(self, command, cwd, env, **group):
            seen.update(env=env)

        def wait(self):
            return 0

    monkeypatch.setattr(step.subprocess, "Popen", FakePopen)
    step.run(["transformer-train", "--help"], **run_kwargs)
    return seen["env"]


def test_training_command_runs_one_process_plainly_and_more_under_torchrun():
    args = ["--config", "c.yaml", "train.max_steps=3"]
    plain = ["py", "-m", "transformer.train", *args]
    assert step.training_command("py", 1, args) == plain
    assert step.training_command("py", 2, args) == [
        "py", "-m", "transformer.cli.torchrun", "--standalone", "--nproc_per_node=2",
        "-m", "transformer.train", *args,
    ]  # fmt: skip


def test_a_sigterm_is_143_even_when_the_step_then_ends_well(foreground_signals, capsys):
    """The quickstart exited 130 after a SIGTERM whenever its step did not end with 130 or 143
    itself (a step that finished its last update anyway, or died of the signal)."""
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
        "time.sleep(60)\n"
    )
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    with pytest.raises(SystemExit) as exit_info:
        step.run([sys.executable, "-c", code])
    timer.join()
    assert exit_info.value.code == 143
    message = "quickstart: interrupted; rerun the same command to resume"
    assert capsys.readouterr().err.strip() == message
