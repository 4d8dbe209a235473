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
from transformer.cli.common import (
    UsageError,
    check_distinct_outputs,
    check_output_path,
    checkpoint_file,
    one_line,
    run,
)

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


def test_one_line():
    assert one_line("a\nb\r\nc") == "a b c"


def test_a_usage_error_is_printed_on_one_line(capsys):
    def work(args):
        raise UsageError("c.yaml: invalid YAML: expected ']'\n  in line 1\n    ^")

    assert run(_parser(), work, []) == 2
    usage, error = capsys.readouterr().err.splitlines()
    assert usage.startswith("usage: tool")
    assert error == "tool: error: c.yaml: invalid YAML: expected ']'   in line 1     ^"


# For each command, a command line whose file option is the empty string (not "not given").
EMPTY_FILE_NAMES = [
    (train.main, ["--config", ""], "--config"),
    (average.main, ["--inputs", "", "--output", "{tmp}/avg.pt"], "--inputs"),
    (average.main, ["--last", "1", "--dir", "", "--output", "{tmp}/avg.pt"], "--dir"),
    (average.main, ["--inputs", "{tmp}/a.pt", "--output", ""], "--output"),
    (translate.main, ["--checkpoint", "{tmp}/c.pt", "--input", ""], "--input"),
    (translate.main, ["--checkpoint", "{tmp}/c.pt", "--output", ""], "--output"),
    (evaluate.main, ["--hyp", "", "--ref", "{tmp}/r.de"], "--hyp"),
    (evaluate.main, ["--hyp", "{tmp}/h.de", "--ref", "{tmp}/r.de", "--json", ""], "--json"),
    (evaluate.main, ["--checkpoint", "{tmp}/c.pt", "--src", "", "--ref", "r"], "--src"),
    (evaluate.main, ["--hyp", "{tmp}/h.de", "--ref", "r", "--output-dir", ""], "--output-dir"),
    (attention.main, ["--checkpoint", "{tmp}/c.pt", "--src", "a", "--json", ""], "--json"),
    (attention.main, ["--checkpoint", "", "--src", "a", "--json", "{tmp}/m.json"], "--checkpoint"),
]


@pytest.mark.parametrize(("main", "argv", "flag"), EMPTY_FILE_NAMES)
def test_an_empty_file_name_is_a_usage_error(tmp_path, capsys, main, argv, flag):
    assert main([arg.format(tmp=tmp_path) for arg in argv]) == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.endswith(f"error: argument {flag}: an empty string is not a file name")
    assert list(tmp_path.iterdir()) == []


def test_output_paths_through_dangling_links_are_refused(tmp_path):
    into_nothing = tmp_path / "out.txt"
    into_nothing.symlink_to(tmp_path / "missing" / "out.txt")
    with pytest.raises(ValueError, match=r"^--output .*out.txt is a symbolic link to .*missing"):
        check_output_path(into_nothing, [], "--output")
    directory = tmp_path / "run"
    directory.symlink_to(tmp_path / "gone")
    with pytest.raises(ValueError, match=r"^--json .*run/x.json: .*run is a symbolic link to "):
        check_output_path(directory / "x.json", [], "--json")
    fine = tmp_path / "fine.txt"  # a dangling link into an existing directory is written through
    fine.symlink_to(tmp_path / "target.txt")
    assert check_output_path(fine, [], "--output") == fine


def test_two_outputs_naming_one_file_are_refused(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "a.json")
    os.link(tmp_path / "a.json", tmp_path / "hard.json")
    for other in ("a.json", "./a.json", "link.json", "hard.json", "sub/../a.json"):
        outputs = [(tmp_path / "a.json", "--output"), (None, "--hyp"), (tmp_path / other, "--json")]
        with pytest.raises(UsageError, match=r"^--output and --json name the same file"):
            check_distinct_outputs(outputs)
    check_distinct_outputs([(tmp_path / "a.json", "--output"), (tmp_path / "b", "--json")])


def test_an_output_file_needs_an_existing_directory(tmp_path):
    out = tmp_path / "typo" / "deeper" / "out.txt"
    with pytest.raises(ValueError) as error:
        check_output_path(out, [], "--output")
    assert str(error.value) == (
        f"--output {out}: the directory {out.parent} does not exist (create it first)"
    )
    # a file in a directory that the command itself creates (one named by --output-dir)
    assert check_output_path(out, [], "--json", creates_directory=True) == out
    assert not (tmp_path / "typo").exists()
    assert check_output_path("out.txt", [], "--output") == Path("out.txt")  # the current one


# For each command and output-file option: a command line that would write FILE (where {out}
# is in a directory that does not exist) before reading the never-read checkpoint.
MISSING_DIRECTORY_CASES = [
    (translate.main, ["--checkpoint", "{tmp}/never.pt", "--input", "{src}"], "--output"),
    (
        evaluate.main,
        ["--checkpoint", "{tmp}/never.pt", "--src", "{src}", "--ref", "{src}"],
        "--json",
    ),
    (
        evaluate.main,
        ["--checkpoint", "{tmp}/never.pt", "--src", "{src}", "--ref", "{src}"],
        "--hyp-out",
    ),
    (evaluate.main, ["--hyp", "{src}", "--ref", "{src}"], "--json"),
    (attention.main, ["--checkpoint", "{tmp}/never.pt", "--src", "a"], "--json"),
    (attention.main, ["--checkpoint", "{tmp}/never.pt", "--src", "a"], "--output"),
]


@pytest.mark.parametrize(("main", "argv", "flag"), MISSING_DIRECTORY_CASES)
def test_an_output_in_a_missing_directory_is_one_line_before_any_work(
    tmp_path, capsys, main, argv, flag
):
    """No silent `mkdir -p`: a typo in a directory name fails at once (exit 1), naming the
    option and the directory; the checkpoint is never read and nothing is created."""
    pytest.importorskip("matplotlib")  # attention's --output checks the image format first
    src = tmp_path / "s.en"
    src.write_text("a man .\n", encoding="utf-8")
    (tmp_path / "never.pt").write_bytes(b"")  # exists (evaluate checks that first), never read
    out = tmp_path / "typo" / ("map.png" if flag == "--output" else "out.txt")
    args = [arg.format(tmp=tmp_path, src=src) for arg in argv] + [flag, str(out)]
    assert main(args) == 1
    prog = {translate.main: "transformer-translate", evaluate.main: "transformer-evaluate"}
    (error,) = capsys.readouterr().err.splitlines()
    assert error == (
        f"{prog.get(main, 'transformer-attention')}: error: {flag} {out}: the directory "
        f"{out.parent} does not exist (create it first)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["never.pt", "s.en"]


def test_a_run_directory_stands_for_its_best_then_its_last_checkpoint(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text("")
    (run_dir / "cache").mkdir()
    with pytest.raises(ValueError) as error:
        checkpoint_file(run_dir, "tool")
    assert str(error.value) == (
        f"--checkpoint {run_dir} is a directory without checkpoint_best.pt or "
        "checkpoint_last.pt; it holds cache/, metrics.jsonl"
    )
    (run_dir / "checkpoint_last.pt").write_bytes(b"")
    assert checkpoint_file(run_dir, "tool") == run_dir / "checkpoint_last.pt"
    (run_dir / "checkpoint_best.pt").write_bytes(b"")
    assert checkpoint_file(str(run_dir), "tool") == run_dir / "checkpoint_best.pt"
    assert capsys.readouterr().err.splitlines() == [
        f"tool: --checkpoint {run_dir} is a run directory: using checkpoint_last.pt",
        f"tool: --checkpoint {run_dir} is a run directory: using checkpoint_best.pt",
    ]
    assert checkpoint_file(run_dir / "x.pt", "tool") == run_dir / "x.pt"  # a file: as given
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "prog", ["transformer-translate", "transformer-evaluate", "transformer-attention"]
)
def test_every_command_taking_a_checkpoint_takes_a_run_directory(
    prog, tmp_path, capsys, monkeypatch, make_model, tiny_tokenizer, write_checkpoint
):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_checkpoint(
        run_dir / "checkpoint_last.pt", make_model(tiny_tokenizer.vocab_size), tiny_tokenizer
    )
    src = tmp_path / "s.en"
    src.write_text("A man.\n", encoding="utf-8")
    argv = ["--checkpoint", str(run_dir)]
    if prog == "transformer-translate":
        main, argv = translate.main, argv + ["--input", str(src), "--max-len-b", "3"]
    elif prog == "transformer-evaluate":
        main, argv = (
            evaluate.main,
            argv + ["--src", str(src), "--ref", str(src), "--max-len-b", "3"],
        )
    else:
        main, argv = attention.main, argv + ["--src", "A man.", "--json", str(tmp_path / "m.json")]
    assert main(argv + ["--beam-size", "1"]) == 0
    err = capsys.readouterr().err
    assert f"{prog}: --checkpoint {run_dir} is a run directory: using checkpoint_last.pt" in err
    if prog == "transformer-evaluate":  # the default outputs go next to the file picked
        assert (run_dir / "checkpoint_last.s.hyp.de").is_file()
    (run_dir / "metrics.jsonl").write_text("")
    (run_dir / "checkpoint_last.pt").unlink()
    assert main(argv) == 1
    (error,) = capsys.readouterr().err.splitlines()
    assert error.startswith(f"{prog}: error: --checkpoint {run_dir} is a directory without ")


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
