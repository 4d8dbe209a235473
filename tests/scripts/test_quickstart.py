"""Tests for scripts/quickstart.py: run directories, the environment of its steps, signals and
the training command it plans (finding Multi30k: tests/data/test_multi30k.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scripts import quickstart
from transformer.config import load_config

# The vocabulary size of the config `make demo` trains (configs/multi30k.yaml).
DEMO_VOCAB = load_config(Path(__file__).parents[2] / "configs" / "multi30k.yaml").data.vocab_size


def test_a_changed_job_gets_its_own_run_directory_and_leaves_results_alone(
    shared_data, monkeypatch, capsys
):
    """`--max-minutes 3` once trained into the real job's directory, and the next plain run
    failed on its leftovers (#17 item 6): now the quick try is planned elsewhere. The run is
    stopped right after the plan (find_multi30k passes; training is replaced)."""
    from scripts import quickstart

    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    calls = []

    def stop(command, again="the same command", env=None):
        calls.append(command)
        raise SystemExit(0)

    monkeypatch.setattr(quickstart, "run", stop)
    with pytest.raises(SystemExit):
        quickstart.main(["--max-minutes", "3"])
    out = capsys.readouterr().out
    assert "a changed job: run directory" in out and "results/ is left alone" in out
    (output_dir,) = [a.split("=", 1)[1] for a in calls[0] if a.startswith("train.output_dir=")]
    real = quickstart.REPO / "checkpoints" / "multi30k_en-de"
    assert Path(output_dir) != real.resolve()
    assert Path(output_dir).name.startswith("multi30k_en-de-")


# A step that saves and stops on SIGINT / SIGTERM as transformer-train does (status 130 / 143),
# after noting each signal it got; without one it would sleep 30 s and exit 0.
STEP = """
import signal, sys, time
def stop(signum, frame):
    open(sys.argv[1], "a").write(f"{signum}\\n"); time.sleep(0.3); sys.exit(128 + signum)
signal.signal(signal.SIGINT, stop); signal.signal(signal.SIGTERM, stop)
open(sys.argv[1] + ".ready", "w").close(); time.sleep(30); sys.exit(0)
"""


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_to_the_quickstart_alone_reaches_the_step_once(signum, status, tmp_path):
    """`kill PID` of the quickstart (a supervisor's SIGTERM) killed it at once and left the
    trainer running; a SIGINT to it alone was not passed on (#17, bad-input pass). Now the step
    gets each signal once, stops, and the quickstart says so in one line with its status (it
    printed a KeyboardInterrupt traceback before that)."""
    seen = tmp_path / "signals"
    code = (
        "from scripts import quickstart; "
        f"quickstart.run([{sys.executable!r}, '-c', {STEP!r}, {str(seen)!r}])"
    )
    quick = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=quickstart.REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not Path(f"{seen}.ready").exists():
        assert quick.poll() is None and time.monotonic() < deadline, quick.communicate()
        time.sleep(0.05)
    quick.send_signal(signum)
    _, err = quick.communicate(timeout=20)
    assert quick.returncode == status, err
    assert err.strip() == "quickstart: interrupted; rerun the same command to resume"
    assert seen.read_text().split() == [str(int(signum))]  # once, not twice


def test_after_fresh_the_line_says_to_rerun_without_it(tmp_path):
    """Rerunning a `--fresh` command would start over again and set aside the checkpoint just
    saved (#17, new-user pass): the line says to drop it."""
    seen = tmp_path / "signals"
    code = (
        "from scripts import quickstart; "
        f"quickstart.run([{sys.executable!r}, '-c', {STEP!r}, {str(seen)!r}], "
        "'it without --fresh')"
    )
    quick = subprocess.Popen(
        [sys.executable, "-c", code], cwd=quickstart.REPO, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not Path(f"{seen}.ready").exists():
        assert quick.poll() is None and time.monotonic() < deadline, quick.communicate()
        time.sleep(0.05)
    quick.send_signal(signal.SIGINT)
    _, err = quick.communicate(timeout=20)
    assert quick.returncode == 130, err
    assert err.strip() == "quickstart: interrupted; rerun it without --fresh to resume"


# A launcher as torchrun is: it passes the first signal on to its worker once and no more.
# The worker notes each signal; the first starts a 20 s "save", a second aborts at once (1).
LAUNCHER = """
import signal, subprocess, sys
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
passed = []
def once(signum, frame):
    if not passed:
        passed.append(signum); worker.send_signal(signum)
signal.signal(signal.SIGINT, once)
sys.exit(worker.wait())
"""
WORKER = """
import signal, sys, time
got = []
def stop(signum, frame):
    got.append(signum); open(sys.argv[1], "a").write(f"{signum}\\n")
    if len(got) > 1:
        sys.exit(1)
    time.sleep(20); sys.exit(130)
signal.signal(signal.SIGINT, stop)
open(sys.argv[1] + ".ready", "w").close(); time.sleep(30)
"""


def test_a_second_ctrl_c_reaches_the_processes_of_a_launcher_step(tmp_path):
    """Under torchrun the quickstart's step is a launcher that passes one signal on; the second
    Ctrl-C now goes to the step's whole process group, so its worker aborts at once."""
    seen = tmp_path / "signals"
    step = [sys.executable, "-c", LAUNCHER, WORKER, str(seen)]
    code = f"from scripts import quickstart; quickstart.run({step!r})"
    quick = subprocess.Popen(
        [sys.executable, "-c", code], cwd=quickstart.REPO, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not Path(f"{seen}.ready").exists():
        assert quick.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    quick.send_signal(signal.SIGINT)
    while not seen.exists():  # the worker got the first one, through the launcher
        assert quick.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    started = time.monotonic()
    quick.send_signal(signal.SIGINT)
    _, err = quick.communicate(timeout=15)
    assert time.monotonic() - started < 10  # not the 20 s "save": the worker aborted
    assert seen.read_text().split() == [str(int(signal.SIGINT))] * 2
    assert quick.returncode == 130
    assert err.strip() == "quickstart: interrupted; rerun the same command to resume"


def test_a_wrong_override_or_missing_data_is_one_line(
    shared_data, tmp_path, monkeypatch, capsys, hub_offline
):
    """A config typo is a wrong command line (2, as transformer-train); no data and no network
    is one line (1), not two chained tracebacks."""
    monkeypatch.setattr(quickstart, "run", lambda *command: pytest.fail("must stop before"))
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    assert quickstart.main(["--max-minutes", "1", "train.max_stpes=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("quickstart: error: ") and "train.max_stpes" in err
    assert len(err.splitlines()) == 1
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(tmp_path / "nothing-here"))
    download = str(tmp_path / "download")
    assert quickstart.main(["--max-minutes", "1", "--download-dir", download]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "TRANSFORMER_DATA_DIR" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--average-last", "0"],
        ["--average-last", "5,ten"],
        ["--beam-sizes", "4,"],
        ["--beam-sizes", "\u0665"],  # an Arabic-Indic 5: int() takes it, the option does not
        ["--average-last", "\u00b2"],
        ["--max-minutes", "0"],
        ["--processes", "0"],
    ],
)
def test_out_of_range_options_stop_before_training(argv, monkeypatch, capsys):
    """`--average-last 0` started the hour of training (#17, bad-input pass)."""
    monkeypatch.setattr(quickstart, "run", lambda *command: pytest.fail("must stop before"))
    assert quickstart.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("quickstart: error: ") and argv[0] in err


def _planned_training(monkeypatch, argv, cores, environments=None):
    """The training command the quickstart would run on `cores` CPU cores without a GPU (and
    the environment it adds, appended to `environments` when given)."""
    calls = []
    environments = [] if environments is None else environments

    def stop(command, again="the same command", env=None):
        calls.append(command)
        environments.append(env)
        raise SystemExit(0)

    monkeypatch.setattr(quickstart, "run", stop)
    monkeypatch.setattr(quickstart, "torch_sees_a_gpu", lambda: False)
    monkeypatch.setattr(quickstart, "usable_cores", lambda: cores)
    with pytest.raises(SystemExit):
        quickstart.main(argv)
    return calls[0]


def test_the_demo_on_two_cpu_cores_trains_two_one_thread_processes(shared_data, monkeypatch):
    """One process per core, one thread each: faster than one two-thread process (#17)."""
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    command = _planned_training(monkeypatch, ["--max-minutes", "3"], cores=2)
    assert command[1:5] == ["-m", "transformer.cli.torchrun", "--standalone", "--nproc_per_node=2"]
    assert "train.num_threads=1" in command
    single = _planned_training(monkeypatch, ["--max-minutes", "3"], cores=1)
    assert single[1:3] == ["-m", "transformer.train"]
    assert not any(a.startswith("train.num_threads=") for a in single)


def test_the_processes_get_their_thread_count_in_the_environment(shared_data, monkeypatch):
    """torchrun printed a 4-line "Setting OMP_NUM_THREADS ... to be 1" warning in every
    2-process demo (#17, new-user pass): the quickstart sets it to the processes' threads."""
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    environments = []
    _planned_training(monkeypatch, ["--max-minutes", "3"], 2, environments)
    _planned_training(monkeypatch, ["--max-minutes", "3", "train.num_threads=3"], 2, environments)
    _planned_training(monkeypatch, ["--max-minutes", "3"], 1, environments)
    assert environments == [{"OMP_NUM_THREADS": "1"}, {"OMP_NUM_THREADS": "3"}, None]


def test_overrides_may_come_between_and_before_the_options(shared_data, monkeypatch):
    """`DEMO_ARGS="--max-minutes 1 train.save_interval_steps=20 --processes 1 train.seed=3"`
    was "unrecognized arguments: train.seed=3" (#17, new-user pass): every override reaches
    the training command, in order, wherever it stands."""
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    argv = ["train.seed=2", "--max-minutes", "1", "train.save_interval_steps=20"]
    argv += ["--processes", "1", "train.seed=3"]
    command = _planned_training(monkeypatch, argv, cores=2)
    assert command[1:3] == ["-m", "transformer.train"]
    given = [a for a in command if a.startswith(("train.seed=", "train.save_interval_steps="))]
    assert given == ["train.seed=2", "train.save_interval_steps=20", "train.seed=3"]


def test_processes_and_threads_given_by_the_user_are_kept(shared_data, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    argv = ["--processes", "1", "--max-minutes", "3"]
    assert _planned_training(monkeypatch, argv, cores=2)[1:3] == ["-m", "transformer.train"]
    argv = ["--max-minutes", "3", "train.num_threads=3"]
    command = _planned_training(monkeypatch, argv, cores=2)
    assert "--nproc_per_node=2" in command and "train.num_threads=1" not in command


@pytest.mark.parametrize(
    "argv, message",
    [
        (["decode.beam_size=2"], "decode.beam_size: the job chooses among --beam-sizes"),
        (
            ["--beam-sizes", f"4,{DEMO_VOCAB + 1}"],
            f"--beam-sizes: {DEMO_VOCAB + 1} beams exceed data.vocab_size ({DEMO_VOCAB})",
        ),
        (["train.keep_last=0"], "train.keep_last (0) must be at least 1"),
        (["data.valid="], "data.valid is empty"),
        (  # one average and one beam, but also the moving average to choose from
            ["--average-last", "5", "--beam-sizes", "4", "train.ema_decay=0.999", "data.valid="],
            "data.valid is empty: the choice is made on it (--average-last N --beam-sizes K, "
            "train.ema_decay=null)",
        ),
        (["data.test="], "data.test is empty"),
        (["data.valid=/nonexistent/val"], "file not found: /nonexistent/val.en (data.valid="),
    ],
)
def test_what_would_fail_after_the_hour_fails_before_it(
    argv, message, shared_data, monkeypatch, capsys
):
    """Each of these once trained for the hour and then failed (or was ignored) at the
    averaging, the choice on validation or the test decoding (#17, bad-input pass)."""
    monkeypatch.setattr(quickstart, "run", lambda *command: pytest.fail("must stop before"))
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    assert quickstart.main(["--max-minutes", "1", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"quickstart: error: {message}") and len(err.splitlines()) == 1
