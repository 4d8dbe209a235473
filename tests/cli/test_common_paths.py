"""Tests for transformer/cli/common.py: the file names every console script takes.

An empty file name is a usage error (2); an output through a dangling link, in a directory that
does not exist, or naming the same file as another output is refused in one line before any
work (1); a run directory given as --checkpoint stands for its best, then its last checkpoint.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from transformer.cli import attention, average, evaluate, train, translate
from transformer.cli.common import (
    UsageError,
    check_distinct_outputs,
    check_output_path,
    checkpoint_file,
)

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
    # A device is written in place, and each writer's text goes to it: both may name /dev/null
    # (`--hyp-out /dev/null --json /dev/null` was refused; new-user pass).
    check_distinct_outputs([(Path("/dev/null"), "--hyp-out"), (Path("/dev/null"), "--json")])


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


@pytest.mark.parametrize(("main", "argv", "flag"), MISSING_DIRECTORY_CASES)
def test_an_output_in_a_directory_the_user_may_not_write_in_fails_before_any_work(
    tmp_path, capsys, monkeypatch, main, argv, flag
):
    """A `--json` in a read-only directory failed after the translation, with the hypotheses
    already written (#17, bad-input pass). Root may write anywhere, so the directory's
    permission is simulated: `os.access` says no for it alone."""
    pytest.importorskip("matplotlib")  # attention's --output checks the image format first
    src = tmp_path / "s.en"
    src.write_text("a man .\n", encoding="utf-8")
    (tmp_path / "never.pt").write_bytes(b"")  # exists (evaluate checks that first), never read
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode: Path(path) != locked and real_access(path, mode)
    )
    out = locked / ("map.png" if flag == "--output" else "out.txt")
    args = [arg.format(tmp=tmp_path, src=src) for arg in argv] + [flag, str(out)]
    assert main(args) == 1
    (error,) = capsys.readouterr().err.splitlines()
    assert error.endswith(f"error: {flag} {out}: cannot write in {locked} (permission denied)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locked", "never.pt", "s.en"]
    assert not any(locked.iterdir())


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


def test_a_stream_or_device_is_written_in_place_whoever_owns_its_directory(tmp_path, monkeypatch):
    """/dev/null, /dev/stdout and a FIFO are written in place (`transformer.atomic`), so the
    directory they are in need not be writable; the check refused them for every user but
    root (#17, bad-input pass). The permission is simulated as above."""
    locked = tmp_path / "locked"
    locked.mkdir()
    fifo = locked / "pipe"
    os.mkfifo(fifo)
    denied = {Path("/dev"), Path("/dev/pts"), Path("/proc/self/fd"), locked}
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode: Path(path) not in denied and real_access(path, mode)
    )
    for stream in ("/dev/null", "/dev/stdout", fifo):
        assert check_output_path(stream, [], "--output") == Path(stream)
    with pytest.raises(ValueError, match="cannot write in .*locked"):
        check_output_path(locked / "file.txt", [], "--output")
