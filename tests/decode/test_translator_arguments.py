"""Tests for transformer/decode/translator.py: the arguments a Translator refuses, each with a
one-line ValueError before anything is translated (settings out of range like the CLI, an
nbest outside the beam, an unknown device, sentences that are not a list or tuple of strings,
flags that are not bools, unknown or conflicting options)."""

from __future__ import annotations

import pytest

from transformer.decode.translator import Translator


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(max_len_a=float("nan")), r"max_len_a \(nan\) must be a finite number"),
        (dict(max_len_b=-100), r"max_len_b \(-100\) must be a finite number >= 0"),
        (dict(length_penalty=float("inf")), "length_penalty"),
        (dict(beam_size=0), r"beam_size \(0\) must be at least 1"),
        (dict(length_penalty_style="fairseq"), "length_penalty_style"),
        (dict(max_tokens=0), r"max_tokens \(0\) must be at least 1"),
        (dict(beam_size=2.0), r"beam_size \(2\.0\) must be an integer"),
        (dict(max_len_b=8.5), r"max_len_b \(8\.5\) must be an integer"),
    ],
)
def test_settings_out_of_range_are_refused_like_the_cli(
    translation_model, synthetic_tokenizer, kwargs, message
):
    translator = Translator(translation_model, synthetic_tokenizer)
    with pytest.raises(ValueError, match=message):
        translator.translate(["a man ."], **kwargs)
    with pytest.raises(ValueError, match=message):
        translator.translate_nbest([""], nbest=1, **kwargs)  # even with nothing to translate


@pytest.mark.parametrize("nbest", [0, 3, 1.5])
def test_nbest_outside_the_beam_is_refused_before_translating(
    translation_model, synthetic_tokenizer, nbest
):
    with pytest.raises(ValueError, match=rf"nbest \({nbest}\) must be"):
        Translator(translation_model, synthetic_tokenizer).translate_nbest(
            [""], beam_size=2, nbest=nbest
        )


def test_unknown_device_is_named(translation_model, synthetic_tokenizer):
    with pytest.raises(ValueError, match=r"device 'gpu0' is not a device"):
        Translator(translation_model, synthetic_tokenizer, device="gpu0")


def test_non_string_sentences_are_named(translation_model, synthetic_tokenizer):
    with pytest.raises(ValueError, match=r"sentences\[1\] is a int, not a string: 5"):
        Translator(translation_model, synthetic_tokenizer).translate(["a man .", 5])


@pytest.mark.parametrize(
    "sentences, kind",
    [
        (None, "NoneType"),
        ((s for s in ["a man ."]), "generator"),
        ({"a man ."}, "set"),
        (b"a", "bytes"),
    ],
)
def test_input_other_than_a_list_or_tuple_of_strings_is_named(
    translation_model, synthetic_tokenizer, sentences, kind
):
    translator = Translator(translation_model, synthetic_tokenizer)
    message = rf"^sentences must be a list or tuple of strings, not {kind}$"
    with pytest.raises(ValueError, match=message):
        translator.translate(sentences)
    with pytest.raises(ValueError, match=message):
        translator.translate_nbest(sentences, nbest=1)


@pytest.mark.parametrize("flag, value", [("greedy", "no"), ("greedy", 1), ("progress", "no")])
def test_flags_must_be_bools(translation_model, synthetic_tokenizer, flag, value):
    translator = Translator(translation_model, synthetic_tokenizer)
    with pytest.raises(ValueError, match=rf"^{flag} \({value!r}\) must be True or False$"):
        translator.translate(["a man ."], **{flag: value})


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(beam=3), r"^unknown option 'beam'; this call takes beam_size, "),
        (dict(temperature=0.5), r"decode\.temperature \(0\.5\) applies to sampling only"),
        (dict(greedy=True, sampling=True), "greedy and sampling exclude each other"),
        (dict(prefix=["a", "b"]), r"prefix must give one string per sentence \(1\), not 2"),
    ],
)
def test_options_are_checked_once_with_one_line(
    translation_model, synthetic_tokenizer, options, message
):
    translator = Translator(translation_model, synthetic_tokenizer)
    for call in (translator.translate, translator.translate_nbest, translator.generate):
        with pytest.raises(ValueError, match=message):
            call(["a man ."], **options)
