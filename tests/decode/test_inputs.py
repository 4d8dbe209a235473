"""Tests for transformer/decode/inputs.py: what callers give `Translator`, checked once."""

from __future__ import annotations

import pytest

from transformer.decode.config import DecodeConfig
from transformer.decode.inputs import Request, as_batch, check_flag, parse_options


def test_a_string_or_a_list_or_tuple_of_strings():
    assert as_batch("a man .") == (["a man ."], True)
    assert as_batch(("a", "b")) == (["a", "b"], False)
    assert as_batch([]) == ([], False)
    with pytest.raises(ValueError, match=r"^targets must be a list or tuple of strings, not set$"):
        as_batch({"a"}, "targets")
    with pytest.raises(ValueError, match=r"^sentences\[1\] is a bytes, not a string: b'x'$"):
        as_batch(["a", b"x"])


def test_options_override_the_defaults_and_keep_the_call_options_apart():
    defaults = DecodeConfig(beam_size=6, max_len_b=20)
    request = parse_options(
        defaults, dict(max_len_b=5, progress=True, prefix=["", "Ein"]), 2, False
    )
    assert request == Request(
        decode=DecodeConfig(beam_size=6, max_len_b=5), progress=True, prefix=["", "Ein"]
    )
    assert parse_options(defaults, {}, 1, True) == Request(decode=defaults)
    assert parse_options(defaults, dict(prefix="Ein"), 1, True).prefix == ["Ein"]


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(beam=2), r"^unknown option 'beam'; this call takes beam_size, length_penalty, "),
        (dict(greedy=1), r"^greedy \(1\) must be True or False$"),
        (dict(progress="no"), r"^progress \('no'\) must be True or False$"),
        (dict(greedy=True, sampling=True), r"^greedy and sampling exclude each other"),
        (dict(top_p=0.5), r"^decode\.top_p \(0\.5\) applies to sampling only"),
        (dict(prefix="Ein"), r"^prefix must give one string per sentence \(2\), not 1"),
        (dict(prefix=["Ein"]), r"^prefix must give one string per sentence \(2\), not 1"),
        (dict(prefix=[1, 2]), r"^prefix\[0\] is a int, not a string"),
    ],
)
def test_bad_options_are_one_line(options, message):
    with pytest.raises(ValueError, match=message):
        parse_options(DecodeConfig(), options, 2, False)


def test_a_call_can_narrow_the_options_it_takes():
    with pytest.raises(
        ValueError, match=r"^unknown option 'beam_size'; this call takes max_tokens$"
    ):
        parse_options(DecodeConfig(), dict(beam_size=2), 1, False, allowed=("max_tokens",))
    with pytest.raises(ValueError, match=r"^alignment \('yes'\) must be True or False$"):
        check_flag("alignment", "yes")
