"""Tests for transformer/decode/config.py: `DecodeConfig`, the one rule set for decoding settings.

The same messages reach users of the YAML config (below), of `Translator`
(tests/decode/test_translator.py) and of the command line (tests/cli/).
"""

from __future__ import annotations

import math

import pytest

from transformer.cli.decode_options import add_decoding_arguments
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


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(sampling="yes"), r"^decode\.sampling \('yes'\) must be true or false$"),
        (dict(temperature=0.0), r"^decode\.temperature \(0\.0\) must be a finite number > 0$"),
        (dict(temperature=float("inf")), r"^decode\.temperature \(inf\) must be a finite"),
        (dict(top_k=-1), r"^decode\.top_k \(-1\) must be at least 0 \(0 = off\)$"),
        (dict(top_k=2.5), r"^decode\.top_k \(2\.5\) must be an integer$"),
        (dict(top_p=0.0), r"^decode\.top_p \(0\.0\) must be in \[1e-06, 0\.999999\], or 1"),
        (dict(top_p=float("nan")), r"^decode\.top_p \(nan\) must be in \[1e-06, 0\.999999\], or 1"),
        (dict(top_p=1e-300), r"^decode\.top_p \(1e-300\) must be in \[1e-06, 0\.999999\], or 1"),
        (dict(top_p=0.99999999), r"^decode\.top_p \(0\.99999999\) must be in \[1e-06, 0\.999999\]"),
        (dict(top_p="0.9"), r"^decode\.top_p \('0\.9'\) must be a number$"),
        (dict(num_samples=0), r"^decode\.num_samples \(0\) must be at least 1$"),
        (dict(seed=-1), r"^decode\.seed \(-1\) must be in \[0, 2\*\*63\)$"),
        (dict(seed=2**63), r"^decode\.seed \(9223372036854775808\) must be in \[0, 2\*\*63\)$"),
        (dict(seed=1.0), r"^decode\.seed \(1\.0\) must be an integer or null$"),
    ],
)
def test_sampling_settings_name_the_key_and_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DecodeConfig(**kwargs)
    with pytest.raises(ValueError, match=message):  # the same rule for the Python API's overrides
        DecodeConfig(sampling=True).override(**kwargs)


def test_override_replaces_what_is_given_and_keeps_the_rest():
    section = DecodeConfig(beam_size=6, max_len_b=20)
    assert section.override() == section
    assert section.override(beam_size=None, max_len_b=5) == DecodeConfig(beam_size=6, max_len_b=5)
    sampled = section.override(sampling=True, top_p=0.9, seed=3)
    assert (sampled.sampling, sampled.top_p, sampled.seed, sampled.beam_size) == (True, 0.9, 3, 6)
    with pytest.raises(ValueError, match=r"^unknown decoding option 'beam'; valid: beam_size, "):
        section.override(beam=3)
    message = r"^decode\.top_k \(5\) applies to sampling only: set decode\.sampling too$"
    with pytest.raises(ValueError, match=message):
        section.override(top_k=5)
    assert section.override(top_k=0, temperature=1.0) == section  # the values it has: no change


def test_nbest_must_fit_in_the_samples_when_sampling():
    DecodeConfig(sampling=True, num_samples=5, beam_size=2).check_nbest(5)
    with pytest.raises(ValueError, match=r"^nbest \(3\) must be between 1 and num_samples \(2\)$"):
        DecodeConfig(sampling=True, num_samples=2, beam_size=8).check_nbest(3)


def test_sampling_keys_load_from_yaml():
    decode = config_from_dict({"decode": {"sampling": True, "top_p": 0.9, "seed": 7}}).decode
    assert (decode.sampling, decode.top_p, decode.seed, decode.rows_per_sentence) == (
        True,
        0.9,
        7,
        1,
    )
