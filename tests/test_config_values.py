"""Tests for transformer/config_values.py: a YAML value against its config field's type."""

from __future__ import annotations

import math

import pytest

from transformer.config_values import coerce


@pytest.mark.parametrize(
    "value, annotation, expected",
    [
        (3, float, 3.0),
        ("1e-9", float, 1e-9),
        ("-inf", float, -math.inf),
        (None, float | None, None),
        (4, int | None, 4),
        ([0.9, 0.98], tuple[float, float], (0.9, 0.98)),
        (True, bool, True),
        ("bpe", str, "bpe"),
    ],
)
def test_yaml_forms_become_the_fields_type(value, annotation, expected):
    result = coerce(value, annotation, "train.x")
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    "value, annotation, expected",
    [
        ("abc", float, "expected float, got 'abc' (str)"),
        ("nan", float | None, "expected float or null, got 'nan' (str)"),
        ("two", int | None, "expected int or null, got 'two' (str)"),
        (5.5, int, "expected int, got 5.5 (float)"),
        (True, int, "expected int, got True (bool)"),
        (0.9, tuple[float, float], "expected a list of 2 values, got 0.9"),
        (10**23, int, "100000000000000000000000 is out of range (at most 2**63 - 1)"),
        (-(2**63) - 1, int | None, "-9223372036854775809 is out of range (at most 2**63 - 1)"),
        (
            False,
            str,
            "expected str, got False (bool); YAML reads yes/no/on/off as booleans: quote the "
            "word, e.g. 'no'",
        ),
        (
            True,
            str | None,
            "expected str or null, got True (bool); YAML reads yes/no/on/off as booleans: "
            "quote the word, e.g. 'no'",
        ),
        (math.nan, float, "expected a number, got .nan (not a number)"),
        (math.nan, float | None, "expected a number, got .nan (not a number)"),
        ([math.nan, 0.98], tuple[float, float], "expected a number, got .nan (not a number)"),
    ],
)
def test_a_wrong_type_is_worded_alike_with_or_without_null(value, annotation, expected):
    """A field that may be null said "value 'abc' is not of type float | None"."""
    with pytest.raises(ValueError) as error:
        coerce(value, annotation, "train.x")
    assert str(error.value) == f"config key train.x: {expected}"
