"""Tests for transformer/cli/common.py: one exit-status rule for every console script.

The rule (module docstring of `transformer.cli.common`): 2 and argparse's usage + `PROG: error:`
for a wrong command line; 1 and one line `PROG: error: ...` when the work cannot be done; 130
and one line after Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pytest
import torch

from transformer.cli import attention, average, evaluate, train, translate
from transformer.cli.common import UsageError, one_line, run

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"

# For each command: a command line with an option value out of range, and one naming an input
# file that does not exist ({tmp} is the test's temporary directory).
CASES = {
    "transformer-train": (
        train.main,
        ["--config", str(TINY), "train.max_steps=0"],
        ["--config", str(TINY), "data.train={tmp}/missing/train", "data.valid=null"]
        + ["train.output_dir={tmp}/run", "train.device=cpu"],
    ),
    "transformer-average": (
        average.main,
        ["--last", "0", "--dir", "{tmp}", "--output", "{tmp}/avg.pt"],
        ["--inputs", "{tmp}/missing.pt", "--output", "{tmp}/avg.pt"],
    ),
    "transformer-translate": (
        translate.main,
        ["--checkpoint", "{tmp}/missing.pt", "--beam-size", "0"],
        ["--checkpoint", "{tmp}/missing.pt", "--input", "{tmp}/missing.en", "--device", "cpu"],
    ),
    "transformer-evaluate": (
        evaluate.main,
        ["--checkpoint", "{tmp}/c.pt", "--src", "{tmp}/s.en", "--ref", "{tmp}/r.de"]
        + ["--max-len-a", "-1"],
        ["--hyp", "{tmp}/missing.de", "--ref", "{tmp}/missing.de"],
    ),
    "transformer-attention": (
        attention.main,
        ["--checkpoint", "{tmp}/missing.pt", "--src", "a", "--json", "{tmp}/m.json"]
        + ["--beam-size", "0"],
        ["--checkpoint", "{tmp}/missing.pt", "--src", "a", "--json", "{tmp}/m.json"],
    ),
}


@pytest.mark.parametrize("prog", list(CASES))
def test_bad_option_exits_2_and_missing_input_exits_1(prog, tmp_path, capsys):
    main, bad_option, missing_input = CASES[prog]
    assert main([arg.format(tmp=tmp_path) for arg in bad_option]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("usage: ") and lines[-1].startswith(f"{prog}: error: ")
    assert "0" in lines[-1] or "-1" in lines[-1]  # the message names the bad value

    assert main([arg.format(tmp=tmp_path) for arg in missing_input]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{prog}: error: ") and "missing" in line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tool")
    parser.add_argument("--n", type=int, default=1)
    return parser


@pytest.mark.parametrize(
    "error, status, expected",
    [
        (UsageError("--n (0) must be at least 1"), 2, "tool: error: --n (0) must be at least 1"),
        (ValueError("bad data\non two lines"), 1, "tool: error: bad data on two lines"),
        (FileNotFoundError("x.txt not found"), 1, "tool: error: x.txt not found"),
        (FloatingPointError("non-finite loss"), 1, "tool: error: non-finite loss"),
        (KeyboardInterrupt(), 130, "tool: interrupted"),
    ],
)
def test_run_maps_each_kind_of_failure_to_its_status(capsys, error, status, expected):
    def work(args):
        raise error

    assert run(_parser(), work, []) == status
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == expected
    assert "Traceback" not in err
    assert err.startswith("usage: tool") == (status == 2)


def test_run_returns_argparse_statuses_instead_of_exiting(capsys):
    assert run(_parser(), lambda args: pytest.fail("ran"), ["--n", "x"]) == 2
    assert "invalid int value" in capsys.readouterr().err
    assert run(_parser(), lambda args: pytest.fail("ran"), ["--help"]) == 0
    seen = []
    assert run(_parser(), seen.append, ["--n", "3"]) == 0
    assert seen[0].n == 3


def test_running_out_of_memory_is_one_line_and_other_runtime_errors_keep_their_traceback(
    capsys,
):
    """`--beam-size 100000` ended in a 30-line traceback from the CPU allocator (#17,
    bad-input pass). The message is the allocator's own, from a real failed allocation."""

    def work(args):
        torch.empty(2**62, dtype=torch.uint8)  # 4 EiB: no machine has it

    assert run(_parser(), work, []) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("tool: error: out of memory: ")

    def overflowing(args):
        torch.empty(300, 2**62)  # model.d_model=2**62: its bytes overflow 64 bits
        # (a traceback: "Storage size calculation overflowed with sizes=[300, ...]")

    assert run(_parser(), overflowing, []) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("tool: error: out of memory: Storage size calculation overflowed")

    def bug(args):
        raise RuntimeError("shape '[2, 3]' is invalid for input of size 7")

    with pytest.raises(RuntimeError, match="shape"):
        run(_parser(), bug, [])


def test_sigterm_during_any_command_is_one_line_and_143(capsys):
    """transformer-translate --output died on SIGTERM without a word and left its temporary
    file (#17, bad-input pass): SIGTERM now ends every command as Ctrl-C does (files being
    written are removed by transformer.atomic), with 128 + 15."""
    import signal

    written = []

    def work(args):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0)  # let the handler run here (it raises)
            time.sleep(5)
        finally:
            written.append("cleaned up")

    before = signal.getsignal(signal.SIGTERM)
    assert run(_parser(), work, []) == 143
    assert capsys.readouterr().err.splitlines() == ["tool: interrupted"]
    assert written == ["cleaned up"] and signal.getsignal(signal.SIGTERM) is before


def test_a_sigterm_the_caller_ignores_stays_ignored():
    """Under `trap '' TERM` a command still ended on SIGTERM once it had loaded (#17,
    bad-input pass): its handler replaced the ignored disposition."""
    import subprocess
    import sys

    code = (
        "import argparse, os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "from transformer.cli.common import run; "
        "work = lambda args: os.kill(os.getpid(), signal.SIGTERM) or time.sleep(0.2) or 0; "
        "sys.exit(run(argparse.ArgumentParser(prog='tool'), work, []))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_closed_pipe_on_stdout_ends_quietly_as_sigpipe_does(tmp_path):
    """`... | transformer-translate ... | head -1` ended with `error: [Errno 32] Broken pipe`
    (#17, bad-input pass). A real closed pipe: the reader exits before the writer writes; the
    reference is the shell's status of a tool that SIGPIPE stops, 128 + 13."""
    import signal
    import subprocess
    import sys

    code = (
        "import argparse, sys, time; from transformer.cli.common import run; "
        "time.sleep(0.5); "
        "sys.exit(run(argparse.ArgumentParser(prog='tool'), "
        "lambda args: [print('line', flush=True) for _ in range(10**6)], []))"
    )
    writer = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    writer.stdout.close()  # the reader is gone before the first line
    err = writer.stderr.read().decode()
    assert writer.wait(timeout=60) == 128 + signal.SIGPIPE, err
    assert err == ""


def test_other_exceptions_are_bugs_and_keep_their_traceback():
    def work(args):
        raise KeyError("bug")

    with pytest.raises(KeyError):
        run(_parser(), work, [])


def test_an_os_error_of_a_file_names_the_file_as_cat_does(tmp_path, capsys):
    """`[Errno 2] No such file or directory: 'nope.en'` becomes `nope.en: No such file or
    directory` (the reason is the system's own, `os.strerror`); our own messages stay."""
    import errno

    for path, code in ((tmp_path / "nope.en", errno.ENOENT), (tmp_path, errno.EISDIR)):
        assert run(_parser(), lambda args, path=path: open(path, "rb"), []) == 1
        assert capsys.readouterr().err.strip() == f"tool: error: {path}: {os.strerror(code)}"


@pytest.mark.parametrize("rank", [None, "0", "1"])
def test_under_torchrun_rank_0_alone_prints_a_usage_error_or_interrupted(monkeypatch, capsys, rank):
    """Every process of a torchrun job finds the same mistake in the config, or is stopped by
    the same Ctrl-C: one line, not one per process. Other failures stay each process's own."""
    if rank is None:
        monkeypatch.delenv("RANK", raising=False)
    else:
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("WORLD_SIZE", "2")
    cases = [(UsageError("c.yaml: unknown key"), 2, rank != "1")]
    cases += [(KeyboardInterrupt(), 130, rank != "1"), (ValueError("bad data"), 1, True)]
    for error, status, printed in cases:

        def work(args, error=error):
            raise error

        assert run(_parser(), work, []) == status
        assert (capsys.readouterr().err != "") == printed, (error, rank)


def test_one_line():
    assert one_line("a\nb\r\nc") == "a b c"


def test_a_usage_error_is_printed_on_one_line(capsys):
    def work(args):
        raise UsageError("c.yaml: invalid YAML: expected ']'\n  in line 1\n    ^")

    assert run(_parser(), work, []) == 2
    usage, error = capsys.readouterr().err.splitlines()
    assert usage.startswith("usage: tool")
    assert error == "tool: error: c.yaml: invalid YAML: expected ']'   in line 1     ^"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize(
    "write", ["(sys.stdout.write('line\\n'), sys.stdout.flush())", "print('line')"]
)
def test_a_full_stdout_is_one_line_naming_stdout(write):
    """`transformer-translate ... > /dev/full` said `error: [Errno 28] No space left on device`
    without naming what was full, or (output still buffered at exit) `Exception ignored ...`
    with status 120 (#17, bad-input pass). Both ways a command writes: a write flushed at once
    (the translations) and a `print` (a summary line). The reference is /dev/full itself:
    every write to it fails with ENOSPC, whose text is the C library's."""
    import errno
    import subprocess
    import sys

    code = (
        "import argparse, sys; from transformer.cli.common import run; "
        f"sys.exit(run(argparse.ArgumentParser(prog='tool'), lambda args: {write}, []))"
    )
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-c", code], stdout=full, stderr=subprocess.PIPE, timeout=60
        )
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert err.splitlines() == [f"tool: error: stdout: {os.strerror(errno.ENOSPC)}"]
