"""Tests for transformer/decode/config.py: `DecodeConfig`, the one rule set for decoding settings.

The same messages reach users of the YAML config (below), of `Translator`
(tests/decode/test_translator.py) and of the command line (tests/cli/).
"""

from __future__ import annotations

import math

import pytest

from transformer.cli.common import add_decoding_arguments
from transformer.config import config_from_dict
from transformer.decode.config import LENGTH_PENALTY_STYLES, MAX_LENGTH_PENALTY, DecodeConfig


def test_defaults_are_the_papers_section_6_1():
    decode = DecodeConfig()
    assert (decode.beam_size, decode.length_penalty, decode.max_len_a, decode.max_len_b) == (
        4,
        0.6,
        1.0,
        50,
    )
    assert decode.length_penalty_style == "gnmt"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(beam_size=0), r"decode\.beam_size \(0\) must be at least 1"),
        (dict(max_tokens=-3), r"decode\.max_tokens \(-3\) must be at least 1"),
        (dict(beam_size=2.5), r"decode\.beam_size \(2\.5\) must be an integer"),
        (dict(beam_size=True), r"decode\.beam_size \(True\) must be an integer"),
        (dict(max_len_b=None), r"decode\.max_len_b \(None\) must be an integer"),
        (dict(length_penalty="0.6"), r"decode\.length_penalty \('0\.6'\) must be a number"),
        (dict(max_len_a=float("nan")), r"decode\.max_len_a \(nan\) must be a finite number >= 0"),
        (dict(length_penalty_style="avg"), r"decode\.length_penalty_style \('avg'\) must be one"),
        (dict(length_penalty=400.0), r"^decode\.length_penalty \(400\.0\) must be at most 10 "),
        (dict(length_penalty=10**400), r"^decode\.length_penalty \(1000.*\) must be a finite"),
        (dict(max_len_b=2**31 + 1), r"^decode\.max_len_b \(2147483649\) must be at most 2\*\*31$"),
        (dict(max_len_b=10**400), r"^decode\.max_len_b \(1000.*\) must be at most 2\*\*31$"),
        (dict(max_len_a=10**400), r"^decode\.max_len_a \(1000.*\) must be a finite number >= 0"),
    ],
)
def test_bad_values_name_the_key_and_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DecodeConfig(**kwargs)


@pytest.mark.parametrize(
    "key, value",
    [
        ("beam_size", 0),
        ("max_tokens", 0),
        ("length_penalty", -0.1),
        ("length_penalty", float("nan")),
        ("length_penalty", float("inf")),
        ("length_penalty", 400.0),
        ("length_penalty_style", "linear"),
        ("max_len_a", -1.0),
        ("max_len_b", -1),
        ("max_len_b", 2**63),
    ],
)
def test_out_of_range_decode_values_name_the_key(key, value):
    with pytest.raises(ValueError, match=rf"decode\.{key}"):
        config_from_dict({"decode": {key: value}})


def test_the_bounds_themselves_are_accepted_and_keep_the_length_penalty_finite():
    from transformer.decode.search import length_penalty

    decode = DecodeConfig(length_penalty=MAX_LENGTH_PENALTY, max_len_b=2**31, max_len_a=2**70)
    assert (decode.length_penalty, decode.max_len_b) == (10.0, 2**31)
    for style in LENGTH_PENALTY_STYLES:  # the longest output any int64 length can name
        assert math.isfinite(length_penalty(2**63, decode.length_penalty, style))


def test_nbest_must_fit_in_the_beam():
    DecodeConfig(beam_size=3).check_nbest(3)
    for nbest in (0, 4):
        with pytest.raises(ValueError, match=rf"nbest \({nbest}\) must be between 1 and beam_size"):
            DecodeConfig(beam_size=3).check_nbest(nbest)
    with pytest.raises(ValueError, match=r"nbest \(2\.0\) must be an integer"):
        DecodeConfig().check_nbest(2.0)


def test_the_command_line_offers_exactly_the_allowed_styles():
    import argparse

    parser = argparse.ArgumentParser()
    add_decoding_arguments(parser)
    (action,) = [a for a in parser._actions if a.dest == "length_penalty_style"]
    assert tuple(action.choices) == LENGTH_PENALTY_STYLES
    for style in LENGTH_PENALTY_STYLES:
        DecodeConfig(length_penalty_style=style)
