"""Tests for scripts/quickstart.py: what the job checks before its hour of training (the rest
of its tests: test_quickstart.py)."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import quickstart
from tests.fixtures.signals import FOREGROUND
from tests.scripts.test_quickstart import _planned_training

REPO = Path(__file__).resolve().parents[2]


def test_an_unusable_results_dir_fails_before_training(shared_data, tmp_path, monkeypatch, capsys):
    """`--results-dir` under a file failed with a NotADirectoryError traceback after training,
    averaging and validation (#17, bad-input pass)."""
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    monkeypatch.setattr(quickstart, "run", lambda *args, **kwargs: pytest.fail("must stop before"))
    (tmp_path / "afile").write_text("x")
    argv = ["--max-minutes", "1", "--run-dir", str(tmp_path / "run")]
    assert quickstart.main([*argv, "--results-dir", str(tmp_path / "afile" / "res")]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert f"quickstart: error: --results-dir {tmp_path / 'afile' / 'res'}: " in error


def test_a_relative_config_is_the_one_in_the_callers_directory(shared_data, tmp_path, monkeypatch):
    """The quickstart checked `--config mytiny.yaml` in the caller's directory but its steps,
    run from the repository, looked for it there (#17, bad-input pass)."""
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    shutil.copy(quickstart.REPO / "configs" / "tiny.yaml", tmp_path / "mytiny.yaml")
    monkeypatch.chdir(tmp_path)
    argv = ["--config", "mytiny.yaml", "--processes", "1", "--run-dir", "run"]
    command = _planned_training(monkeypatch, argv, cores=2)
    assert command[command.index("--config") + 1] == str(tmp_path / "mytiny.yaml")


@pytest.mark.parametrize(
    "overrides, note",
    [
        ([], None),  # the config keeps the 10 the job averages
        (["train.keep_last=7"], "so the last 10 will be the average of those 7;"),
        (["train.keep_last=3"], "the last 5 and the last 10 will both be the average of those 3;"),
    ],
)
def test_averages_larger_than_keep_last_are_said_before_training(
    overrides, note, shared_data, tmp_path, monkeypatch, capsys
):
    """`--average-last` above `train.keep_last` was only said after the hour of training, when
    it was too late to keep more checkpoints (#17, bad-input pass)."""
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    argv = ["--max-minutes", "1", "--run-dir", str(tmp_path / "run"), *overrides]
    _planned_training(monkeypatch, argv, cores=2)
    said = [line for line in capsys.readouterr().out.splitlines() if "note:" in line]
    if note is None:
        assert said == []
    else:
        assert len(said) == 1 and said[0].startswith(
            "quickstart: note: --average-last 5,10,1: train.keep_last ("
        )
        assert note in said[0] and said[0].endswith("raise train.keep_last to average more")


def test_the_script_loads_without_torch():
    """Its module-level imports loaded torch (a second or more) before `main`'s Ctrl-C handler:
    a Ctrl-C then printed a KeyboardInterrupt traceback (#17, bad-input pass)."""
    code = "import sys, scripts.quickstart; print('torch' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"


def test_a_ctrl_c_while_torch_loads_is_one_line(monkeypatch, capsys, foreground_signals):
    recorded = quickstart.recorded_signals

    @contextlib.contextmanager
    def interrupted_while_loading():
        with recorded() as received:
            signal.raise_signal(signal.SIGINT)  # recorded: the job does not start
            yield received

    monkeypatch.setattr(quickstart, "recorded_signals", interrupted_while_loading)
    assert quickstart.main(["--help"]) == 130
    assert capsys.readouterr().err == "quickstart: interrupted\n"  # nothing ran: no resume


_SIGNALLED_LOAD = (
    FOREGROUND
    + """
import contextlib, os, signal, sys
from scripts import quickstart
recorded = quickstart.recorded_signals
@contextlib.contextmanager
def terminated_while_loading():
    with recorded() as received:
        os.kill(os.getpid(), signal.SIGTERM)
        yield received
quickstart.recorded_signals = terminated_while_loading
sys.exit(quickstart.main(["--help"]))
"""
)


def test_a_sigterm_while_torch_loads_is_one_line():
    """A SIGTERM (a scheduler's) while the job's modules loaded ended it with 143 and said
    nothing, where every command says `<prog>: interrupted` (transformer/cli/launch.py)."""
    done = subprocess.run(
        [sys.executable, "-c", _SIGNALLED_LOAD],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (143, "", "quickstart: interrupted\n")


@pytest.mark.parametrize(
    "argv, message",
    [
        # "" was the default run directory: the full job trained in the real job's folder.
        (["--run-dir", ""], "--run-dir is empty: name a folder"),
        (["--results-dir", " "], "--results-dir is empty: name a folder"),
        (["--config", ""], "--config is empty: name a file"),
        # torchrun refused it after the quickstart had started, which then exited 1 in 4 lines.
        (["--processes", "9"], "--processes (9): more than 4 processes per CPU core (2 here)"),
    ],
)
def test_an_empty_folder_or_too_many_processes_is_one_line_before_anything(
    argv, message, monkeypatch, capsys
):
    monkeypatch.setattr(quickstart, "run", lambda *args, **kwargs: pytest.fail("must stop before"))
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    assert quickstart.main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"quickstart: error: {message}")
