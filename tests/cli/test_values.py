"""Tests for transformer/cli/values.py: the option value types take what the config takes.

References: the builtins `int` and `float` (on ASCII text), and the config's YAML, which reads
ASCII digits only.
"""

from __future__ import annotations

import pytest

from transformer.cli import translate
from transformer.cli.values import integer, number


@pytest.mark.parametrize(
    "option, value, kind",
    [
        ("--beam-size", "٤", "int"),
        ("--beam-size", "４", "int"),
        ("--length-penalty", "٠.٥", "float"),
    ],
)
def test_numbers_of_other_scripts_are_refused_as_in_the_config(option, value, kind, capsys):
    """`int("٤")` is 4 and `float("٠.٥")` 0.5; the config (YAML) takes ASCII digits only, and
    so do the options now (bad-input pass, #17: `--beam-size ٤` decoded with 4 beams)."""
    assert float(value) >= 0  # the builtin takes them
    assert translate.main(["--checkpoint", "c.pt", option, value]) == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert (
        error == f"transformer-translate: error: argument {option}: invalid {kind} value: {value!r}"
    )


@pytest.mark.parametrize("value, expected", [("4", 4), ("-1", -1), (" 12 ", 12)])
def test_ascii_integers_read_as_int_does(value, expected):
    assert integer(value) == int(value) == expected
    assert number(value) == float(value)
