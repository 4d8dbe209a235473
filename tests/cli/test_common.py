"""Tests for transformer/cli/common.py: one exit-status rule for every console script.

The rule (module docstring of `transformer.cli.common`): 2 and argparse's usage + `PROG: error:`
for a wrong command line; 1 and one line `PROG: error: ...` when the work cannot be done; 130
and one line after Ctrl-C.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from transformer.cli import attention, average, evaluate, train, translate
from transformer.cli.common import UsageError, decoding_config, one_line, run

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


def test_other_exceptions_are_bugs_and_keep_their_traceback():
    def work(args):
        raise KeyError("bug")

    with pytest.raises(KeyError):
        run(_parser(), work, [])


def test_decoding_options_are_named_as_on_the_command_line():
    args = argparse.Namespace(beam_size=None, length_penalty_style=None, max_tokens=0)
    with pytest.raises(UsageError, match=r"^--max-tokens \(0\) must be at least 1$"):
        decoding_config(args)


def test_one_line():
    assert one_line("a\nb\r\nc") == "a b c"
