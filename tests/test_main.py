"""Tests for transformer/__main__.py: `python -m transformer <command>` is the console script
`transformer-<command>` (the reference: pyproject.toml's own script table and a fresh
interpreter)."""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from transformer.cli import launch

REPO = Path(__file__).resolve().parents[1]


def test_every_console_script_is_a_command():
    table = (REPO / "pyproject.toml").read_text().split("[project.scripts]")[1].split("\n[")[0]
    scripts = re.findall(r'^transformer-(\S+) = "transformer\.cli\.launch:\1"$', table, re.M)
    assert sorted(launch.COMMANDS) == sorted(scripts) and len(scripts) >= 9


@pytest.mark.parametrize("command", ["evaluate", "average", "train"])
def test_the_command_and_its_arguments_are_passed_on(command, monkeypatch):
    started = []
    fake = SimpleNamespace(main=lambda argv: started.append(argv) or 7)
    monkeypatch.setattr(
        launch.importlib, "import_module", lambda name: started.append(name) or fake
    )
    monkeypatch.setattr(sys, "argv", ["transformer", command, "--x", "1"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("transformer", run_name="__main__")
    assert exit_.value.code == 7
    assert started == [f"transformer.cli.{command}", ["--x", "1"]]


def test_ctrl_c_while_torch_loads_is_one_line(monkeypatch, capsys):
    """`python -m transformer.cli.evaluate` (make demo's decoding steps) imported torch before
    any handler: a Ctrl-C in its first seconds printed a KeyboardInterrupt traceback (#17)."""

    def interrupted_import(name):
        raise KeyboardInterrupt

    monkeypatch.setattr(launch.importlib, "import_module", interrupted_import)
    monkeypatch.setattr(sys, "argv", ["transformer", "evaluate", "--help"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("transformer", run_name="__main__")
    assert exit_.value.code == 130
    assert capsys.readouterr().err == "transformer-evaluate: interrupted\n"


@pytest.mark.parametrize(
    "argv, code, last_line",
    [
        ([], 2, "python -m transformer: error: a command is needed"),
        (["evaluat"], 2, "python -m transformer: error: unknown command 'evaluat'"),
        (
            ["--help"],
            0,
            "runs transformer-<command> with the arguments (its -h: the options)",
        ),
    ],
)
def test_no_command_or_an_unknown_one_is_a_usage_error(argv, code, last_line):
    done = subprocess.run(
        [sys.executable, "-m", "transformer", *argv], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == code
    out = (done.stderr if code else done.stdout).strip().splitlines()
    assert out[0].startswith("usage: python -m transformer {prepare,train,average,")
    assert out[-1] == last_line and "Traceback" not in done.stderr


def test_a_command_runs_in_a_fresh_interpreter():
    done = subprocess.run(
        [sys.executable, "-m", "transformer", "average", "--help"],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith("usage: transformer-average")


def test_help_into_a_closed_pipe_ends_quietly():
    """`python -m transformer -h | head -0` printed a BrokenPipeError traceback (#17,
    bad-input pass); the commands themselves end quietly with 141, as SIGPIPE ends a tool."""
    child = subprocess.Popen(
        [sys.executable, "-m", "transformer", "-h"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    child.stdout.close()  # the reader goes away before the child (still starting) writes
    error = child.stderr.read().decode()
    assert child.wait(timeout=60) == 141 and error == ""
