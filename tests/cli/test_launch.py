"""Tests for transformer/cli/launch.py: every console script goes through it, and it sets the
OpenMP wait policy before torch loads (the reference: `sys.modules` of a fresh interpreter and
pyproject.toml's own script table)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures.signals import FOREGROUND
from transformer.cli import launch

REPO = Path(__file__).resolve().parents[2]


def test_the_package_and_the_launcher_load_without_torch():
    """libgomp reads OMP_WAIT_POLICY when torch loads: neither may import it first."""
    code = "import sys, transformer, transformer.cli.launch; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    code = "from transformer import Translator, load_checkpoint, ModelConfig; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "ok"
    import transformer

    assert sorted(transformer.__all__) == sorted(transformer._EXPORTS)
    assert all(getattr(transformer, name) is not None for name in transformer.__all__)


def test_every_console_script_starts_its_own_command(monkeypatch):
    table = (REPO / "pyproject.toml").read_text().split("[project.scripts]")[1].split("\n[")[0]
    scripts = dict(re.findall(r'^(\S+) = "(\S+)"$', table, re.MULTILINE))
    assert len(scripts) >= 9
    started = []
    fake = SimpleNamespace(main=lambda argv: argv)
    monkeypatch.setattr(
        launch.importlib, "import_module", lambda name: started.append(name) or fake
    )
    for script, target in scripts.items():
        module, function = target.split(":")
        assert module == "transformer.cli.launch", script
        assert getattr(launch, function)(["--help"]) == ["--help"]  # argv passed on
        command = script.removeprefix("transformer-")
        assert started.pop() == f"transformer.cli.{command}"
        assert callable(__import__(f"transformer.cli.{command}", fromlist=["main"]).main)


@pytest.mark.parametrize("given", [None, "ACTIVE"])
def test_passive_wait_policy_unless_the_environment_sets_one(given, monkeypatch):
    if given is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", given)
    seen = {}
    fake = SimpleNamespace(
        main=lambda argv: seen.setdefault("policy", launch.os.environ.get("OMP_WAIT_POLICY"))
    )
    monkeypatch.setattr(launch.importlib, "import_module", lambda name: fake)
    launch.start("translate")
    assert seen["policy"] == (given or "PASSIVE")  # set before the command's module loads


def test_ctrl_c_while_the_command_loads_is_one_line(monkeypatch, capsys):
    """Ctrl-C in the first second or two (torch loading) printed a KeyboardInterrupt traceback
    (#17, bad-input pass)."""

    def interrupted_import(name):
        raise KeyboardInterrupt

    monkeypatch.setattr(launch.importlib, "import_module", interrupted_import)
    assert launch.translate(["--help"]) == 130
    assert capsys.readouterr().err == "transformer-translate: interrupted\n"


def test_python_m_transformer_train_goes_through_the_launcher(monkeypatch, capsys):
    """`python -m transformer.train` (make demo's training step) imported torch before any
    handler: a Ctrl-C in its first seconds printed a KeyboardInterrupt traceback (#17,
    bad-input pass). It now runs `transformer-train`'s entry point."""
    import runpy

    def interrupted_import(name):
        raise KeyboardInterrupt

    monkeypatch.setattr(launch.importlib, "import_module", interrupted_import)
    monkeypatch.setattr(launch.sys, "argv", ["transformer.train", "--help"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("transformer.train", run_name="__main__")
    assert exit_.value.code == 130
    assert capsys.readouterr().err == "transformer-train: interrupted\n"


def test_a_ctrl_c_that_an_import_would_drop_still_ends_the_command(
    monkeypatch, capsys, foreground_signals
):
    """A Ctrl-C while torch loads could land in numpy's import, made by torch's C code, which
    dropped the KeyboardInterrupt: the command then ran to its end and exited 0 (#17, bad-input
    pass, 5 of 18 tries). The signal is now recorded, and the command does not start."""
    ran = []

    def import_that_drops_the_interrupt(name):
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass  # what torch's C code did with it
        return SimpleNamespace(main=lambda argv: ran.append(argv) or 0)

    monkeypatch.setattr(launch.importlib, "import_module", import_that_drops_the_interrupt)
    assert launch.translate(["--help"]) == 130
    assert ran == []
    assert capsys.readouterr().err == "transformer-translate: interrupted\n"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # given back


_SIGNALLED_START = (
    FOREGROUND
    + """
import os, signal, sys, types
from transformer.cli import launch
if sys.argv[2] == "ignored":
    signal.signal(getattr(signal, sys.argv[1]), signal.SIG_IGN)
def loading(name):
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    return types.SimpleNamespace(main=lambda argv: print("ran") or 0)
launch.importlib.import_module = loading
sys.exit(launch.start("score", []))
"""
)


@pytest.mark.parametrize(
    ("signame", "handling", "status", "stdout", "stderr"),
    [
        ("SIGTERM", "default", 143, "", "transformer-score: interrupted\n"),
        ("SIGINT", "ignored", 0, "ran\n", ""),  # a background job's: it stays ignored
        ("SIGTERM", "ignored", 0, "ran\n", ""),
    ],
)
def test_a_signal_while_the_command_loads(signame, handling, status, stdout, stderr):
    """SIGTERM (a scheduler's) in the first second ended the command silently with 143: it now
    says so in one line. A signal the caller ignores stays ignored."""
    done = subprocess.run(
        [sys.executable, "-c", _SIGNALLED_START, signame, handling],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (status, stdout, stderr)
