"""Tests for transformer/cli/prefix_lines.py: `source SEP prefix` input lines.

Reference: the lines as written by hand, source and prefix known.
"""

from __future__ import annotations

import pytest

from transformer.cli.prefix_lines import split_prefix_lines


def split(lines, separator, name="in.en", first=0):
    return split_prefix_lines(lines, separator, name, first, "tool")


def test_each_line_splits_into_its_source_and_prefix_and_a_line_without_has_none(capsys):
    lines = ["a man ||| ein Mann", "a dog", " ||| ", "nur Quelle ||| ", "a well-known man"]
    assert split(lines, " ||| ") == (
        ["a man", "a dog", "", "nur Quelle", "a well-known man"],
        ["ein Mann", "", "", "", ""],
    )
    # A one-symbol separator's core is ordinary text: `-` in a line is no near miss of ` - `.
    assert split(["a well-known man"], " - ") == (["a well-known man"], [""])
    assert split(["a｜b"], " ｜ ") == (["a｜b"], [""])
    assert split(["a|b"], "|") == (["a"], ["b"])  # no spaces to miss
    assert capsys.readouterr().err == ""


def test_the_separator_twice_is_an_error_naming_the_line():
    with pytest.raises(ValueError, match=r"^in\.en, line 12: --prefix-separator '\\t' occurs 2"):
        split(["a\tb", "c\td\te"], "\t", first=10)


@pytest.mark.parametrize("line", ["a man|||ein", "a man ||| ein", "a man |||ein"])
def test_the_separator_without_its_spaces_is_a_warning_naming_the_line(line, capsys):
    """`a man|||ein` with `--prefix-separator ' ||| '` translated `a man|||ein` whole,
    silently (#17, bad-input pass). Text may hold the symbols (`well--known` for ' -- ',
    `waits...` for ' ... '), so the line is still translated whole: a warning, no error."""
    separator = "  |||  "
    assert split(["a dog", line], separator, "<stdin>", 4) == (["a dog", line], ["", ""])
    assert capsys.readouterr().err == (
        f"tool: warning: <stdin>, line 6: --prefix-separator '{separator}' does not occur, but "
        "'|||' does: the line is translated whole, without a prefix (write the separator with "
        "its spaces)\n"
    )
    assert split(["a well--known man"], " -- ") == (["a well--known man"], [""])
    assert "line 1: --prefix-separator ' -- ' does not occur, but '--'" in capsys.readouterr().err


def test_a_prefix_without_a_source_is_an_error_naming_the_line():
    """` ||| Ein Mann` gave an empty line: the empty source is not translated, and the prefix
    was lost (#17, bad-input pass)."""
    with pytest.raises(ValueError, match=r"^in\.en, line 2: .* has a prefix but no source"):
        split(["a ||| b", "  ||| Ein Mann"], " ||| ")
