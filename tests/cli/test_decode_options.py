"""Tests for transformer/cli/decode_options.py: one set of decoding options for two commands.

- transformer-translate and transformer-evaluate offer exactly the same decoding options;
- evaluate with sampling and a seed is reproducible and writes translate's output for the
  same options (and both are the Python API's `Translator.translate`);
- without `--seed`, evaluate writes the seed it drew, and that seed gives its hypotheses again;
- bad values, or sampling options without `--sampling`, are one-line errors with status 2,
  worded alike by both commands, before any file is read.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from types import SimpleNamespace

import pytest

from transformer.cli import evaluate, translate
from transformer.cli.common import UsageError
from transformer.cli.decode_options import (
    DECODE_OPTIONS,
    add_decoding_arguments,
    decoding_config,
    warn_capped_lines,
)
from transformer.decode.config import DecodeConfig
from transformer.decode.translator import Translator

SAMPLING = ["--sampling", "--top-p", "0.9", "--temperature", "0.8", "--max-len-b", "6"]


@pytest.fixture(scope="module")
def files(tmp_path_factory, translation_model, synthetic_tokenizer, write_checkpoint):
    """A folder and a checkpoint in it."""
    folder = tmp_path_factory.mktemp("decode_options")
    checkpoint = write_checkpoint(folder / "checkpoint.pt", translation_model, synthetic_tokenizer)
    return folder, checkpoint


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _evaluate(folder, checkpoint, src, ref, name, options):
    """Run transformer-evaluate; its hypotheses and JSON report."""
    hyp, report = folder / f"{name}.hyp.de", folder / f"{name}.json"
    argv = ["--checkpoint", str(checkpoint), "--src", str(src), "--ref", str(ref)]
    argv += ["--hyp-out", str(hyp), "--json", str(report), "--device", "cpu", *options]
    assert evaluate.main(argv) == 0
    return hyp.read_text(encoding="utf-8").splitlines(), json.loads(report.read_text())


def _translate(monkeypatch, checkpoint, src, options):
    """Run transformer-translate on `src`; its output lines."""
    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    argv = ["--checkpoint", str(checkpoint), "--input", str(src), "--device", "cpu", *options]
    assert translate.main(argv) == 0
    return stdout.getvalue().splitlines()


DESTINATIONS = {*DECODE_OPTIONS, "greedy", "device", "linear_kernel"}


def _options(parser: argparse.ArgumentParser) -> dict[str, tuple]:
    """Each decoding option of `parser`, by name, with what defines it."""
    return {
        action.option_strings[0]: (action.dest, action.type, action.default, action.choices)
        for action in parser._actions
        if action.dest in DESTINATIONS
    }


def test_translate_and_evaluate_offer_the_same_decoding_options():
    ours = argparse.ArgumentParser()
    add_decoding_arguments(ours)
    expected = _options(ours)
    assert {dest for dest, *_ in expected.values()} == DESTINATIONS  # a flag per field
    assert _options(translate.build_parser()) == expected
    assert _options(evaluate.build_parser()) == expected


def test_evaluate_samples_reproducibly_what_translate_samples(
    files, synthetic_sentences, monkeypatch
):
    folder, checkpoint = files
    lines = synthetic_sentences(7, seed=70)
    src = _write(folder / "test.en", lines)
    ref = _write(folder / "test.de", synthetic_sentences(7, seed=71))
    options = [*SAMPLING, "--seed", "5", "--num-samples", "2"]
    first, report = _evaluate(folder, checkpoint, src, ref, "first", options)
    again, _ = _evaluate(folder, checkpoint, src, ref, "again", options)
    assert first == again
    assert first == _translate(monkeypatch, checkpoint, src, options)
    expected = Translator.from_checkpoint(checkpoint).translate(
        lines, sampling=True, top_p=0.9, temperature=0.8, max_len_b=6, seed=5, num_samples=2
    )
    assert first == expected
    other, _ = _evaluate(folder, checkpoint, src, ref, "other", [*SAMPLING, "--seed", "6"])
    assert other != first  # the seed matters (7 sampled lines agreeing by chance: no)
    decoding = report["decoding"]
    assert (decoding["sampling"], decoding["seed"], decoding["top_p"]) == (True, 5, 0.9)


def test_evaluate_without_a_seed_reports_the_one_it_drew(files, synthetic_sentences):
    folder, checkpoint = files
    lines = synthetic_sentences(5, seed=72)
    src = _write(folder / "drawn.en", lines)
    hyps, report = _evaluate(folder, checkpoint, src, src, "drawn", SAMPLING)
    seed = report["decoding"]["seed"]
    assert isinstance(seed, int) and 0 <= seed < 2**63
    again, _ = _evaluate(folder, checkpoint, src, src, "redrawn", [*SAMPLING, "--seed", str(seed)])
    assert again == hyps


@pytest.mark.parametrize(
    "options, message",
    [
        (["--top-p", "0.5"], "--top-p (0.5) applies to sampling only: set --sampling too"),
        (["--seed", "3"], "--seed (3) applies to sampling only: set --sampling too"),
        (["--sampling", "--greedy"], "--greedy and --sampling exclude each other"),
        (
            ["--greedy", "--beam-size", "4"],
            "--greedy and --beam-size exclude each other (greedy is one beam)",
        ),
        (["--sampling", "--top-p", "0"], "--top-p (0.0) must be in [1e-06, 0.999999], or 1 (off)"),
        (
            ["--sampling", "--top-p", "nan"],
            "--top-p (nan) must be in [1e-06, 0.999999], or 1 (off)",
        ),
        (["--sampling", "--top-k", "-1"], "--top-k (-1) must be at least 0 (0 = off)"),
        (["--sampling", "--temperature", "0"], "--temperature (0.0) must be a finite number > 0"),
        (["--sampling", "--num-samples", "0"], "--num-samples (0) must be at least 1"),
        (["--sampling", "--seed", "-1"], "--seed (-1) must be in [0, 2**63)"),
    ],
)
def test_bad_sampling_options_are_one_line_errors_of_both_commands(
    tmp_path, capsys, options, message
):
    never = str(tmp_path / "never-read.pt")  # checked before any file is read
    missing = str(tmp_path / "missing.en")
    for prog, main, argv in [
        ("transformer-translate", translate.main, ["--checkpoint", never]),
        ("transformer-evaluate", evaluate.main, ["--checkpoint", never, "--src", missing]),
    ]:
        if main is evaluate.main:
            argv += ["--ref", missing]
        assert main(argv + options) == 2
        error = capsys.readouterr().err.splitlines()
        assert error[0].startswith("usage: ")
        assert error[-1] == f"{prog}: error: {message}", prog
        assert [line for line in error if "error:" in line] == [error[-1]]  # after the usage


def test_option_names_replace_the_config_keys_in_messages():
    args = argparse.Namespace(beam_size=None, length_penalty_style=None, max_tokens=0)
    with pytest.raises(UsageError, match=r"^--max-tokens \(0\) must be at least 1$"):
        decoding_config(args)


def test_given_options_override_the_checkpoint_section_and_greedy_excludes_its_sampling():
    parser = argparse.ArgumentParser()
    add_decoding_arguments(parser)
    section = DecodeConfig(sampling=True, top_p=0.8, seed=4)
    args = parser.parse_args(["--top-p", "0.5"])
    assert decoding_config(args, section) == DecodeConfig(sampling=True, top_p=0.5, seed=4)
    assert decoding_config(parser.parse_args([]), section) == section
    with pytest.raises(UsageError, match=r"^--greedy and --sampling exclude each other$"):
        decoding_config(parser.parse_args(["--greedy"]), section)


def _translator(max_positions: int):
    """What `warn_capped_lines` uses of a Translator: one token per word."""
    config = SimpleNamespace(max_positions=max_positions)
    tokenizer = SimpleNamespace(encode_batch=lambda lines: [line.split() for line in lines])
    return SimpleNamespace(model=SimpleNamespace(config=config), tokenizer=tokenizer)


@pytest.mark.parametrize(
    ("a", "b", "warned"),
    [
        (1.0, 5, None),  # 3 + 5 = 8 = max_positions: not capped
        (1.5, 4, None),  # floor(8.5) = 8, the decoder's limit: not capped
        (2.0, 3, "9"),
        (1e300, 0, "3e+300"),
        (1e308, 50, "inf"),  # a * S overflows the float range
    ],
)
def test_warn_capped_lines_for_any_finite_a_and_b(capsys, a, b, warned):
    settings = {"max_len_a": a, "max_len_b": b}
    warn_capped_lines("tool", _translator(8), ["x y z", ""], settings)
    lines = capsys.readouterr().err.splitlines()
    if warned is None:
        assert lines == []
    else:
        (line,) = lines
        assert line.startswith("tool: warning: line 1 has 3 source tokens")
        assert f"limited to max_positions (8) tokens instead of {warned} " in line
