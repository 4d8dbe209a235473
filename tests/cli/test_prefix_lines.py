"""Tests for transformer/cli/prefix_lines.py: `source SEP prefix` input lines.

Reference: the lines as written by hand, source and prefix known.
"""

from __future__ import annotations

import pytest

from transformer.cli.prefix_lines import split_prefix_lines


def test_each_line_splits_into_its_source_and_prefix_and_a_line_without_has_none():
    lines = ["a man ||| ein Mann", "a dog", " ||| ", "nur Quelle ||| ", "a well-known man"]
    assert split_prefix_lines(lines, " ||| ", "in.en", 0) == (
        ["a man", "a dog", "", "nur Quelle", "a well-known man"],
        ["ein Mann", "", "", "", ""],
    )
    # A one-symbol separator's core is ordinary text: `-` in a line is no near miss of ` - `.
    assert split_prefix_lines(["a well-known man"], " - ", "in.en", 0) == (
        ["a well-known man"],
        [""],
    )
    assert split_prefix_lines(["a｜b"], " ｜ ", "in.en", 0) == (["a｜b"], [""])
    assert split_prefix_lines(["a|b"], "|", "in.en", 0) == (["a"], ["b"])  # no spaces to miss


def test_the_separator_twice_is_an_error_naming_the_line():
    with pytest.raises(ValueError, match=r"^in\.en, line 12: --prefix-separator '\\t' occurs 2"):
        split_prefix_lines(["a\tb", "c\td\te"], "\t", "in.en", 10)


@pytest.mark.parametrize("line", ["a man|||ein", "a man ||| ein", "a man |||ein"])
def test_the_separator_without_its_spaces_is_an_error_not_part_of_the_source(line):
    """`a man|||ein` with `--prefix-separator ' ||| '` translated `a man|||ein` whole,
    silently (#17, bad-input pass)."""
    separator = "  |||  "
    message = rf"^<stdin>, line 1: --prefix-separator '{separator}' does not occur, but '\|\|\|'"
    with pytest.raises(ValueError, match=message):
        split_prefix_lines([line], separator, "<stdin>", 0)


def test_a_prefix_without_a_source_is_an_error_naming_the_line():
    """` ||| Ein Mann` gave an empty line: the empty source is not translated, and the prefix
    was lost (#17, bad-input pass)."""
    with pytest.raises(ValueError, match=r"^in\.en, line 2: .* has a prefix but no source"):
        split_prefix_lines(["a ||| b", "  ||| Ein Mann"], " ||| ", "in.en", 0)
