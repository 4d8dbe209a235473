"""Tests for scripts/step.py: the environment of a job's steps (their signals: in
test_quickstart.py, which runs whole steps)."""

from __future__ import annotations

import os
import sys

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
