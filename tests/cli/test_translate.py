"""Tests for transformer/cli/translate.py (the transformer-translate command)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from transformer.cli.decode_options import decoding_config, warn_capped_lines
from transformer.cli.translate import _exactly, build_parser, main
from transformer.decode.config import DecodeConfig
from transformer.decode.translator import Translator


def test_file_to_file_one_line_per_input_line(
    checkpoint, translation_model, synthetic_tokenizer, tmp_path, synthetic_sentences
):
    sentences = synthetic_sentences(7, seed=10)
    lines = [sentences[0], "", sentences[1], "  ", *sentences[2:]]
    source = tmp_path / "input.en"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / "output.de"
    code = main(
        ["--checkpoint", str(checkpoint), "--input", str(source), "--output", str(output)]
        + ["--beam-size", "3", "--max-len-b", "8", "--max-tokens", "12", "--device", "cpu"]
    )
    assert code == 0
    written = output.read_text(encoding="utf-8").split("\n")
    assert written[-1] == "" and len(written) - 1 == len(lines)
    expected = Translator(translation_model, synthetic_tokenizer).translate(
        lines, beam_size=3, max_len_b=8
    )
    assert written[:-1] == expected
    assert written[1] == "" and written[3] == ""


def test_stdin_to_stdout_and_nbest_format(checkpoint, monkeypatch, capsys, synthetic_sentences):
    sentences = synthetic_sentences(3, seed=11)
    text = "\n".join([sentences[0], "", sentences[1], sentences[2]]) + "\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))
    assert main(["--checkpoint", str(checkpoint), "--max-len-b", "8", "--greedy"]) == 0
    assert len(capsys.readouterr().out.split("\n")) == 5

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))
    assert main(["--checkpoint", str(checkpoint), "--max-len-b", "8", "--nbest", "2"]) == 0
    rows = [line.split(" ||| ") for line in capsys.readouterr().out.splitlines()]
    assert [int(r[0]) for r in rows] == [0, 0, 1, 1, 2, 2, 3, 3]  # N lines per input line
    assert rows[2] == rows[3] == ["1", "", "0.000000"]
    assert float(rows[0][2]) >= float(rows[1][2])


def test_errors_are_one_clear_line(checkpoint, tmp_path, capsys):
    source = tmp_path / "input.en"
    source.write_text("a man.\n", encoding="utf-8")
    assert main(["--checkpoint", str(tmp_path / "nope.pt"), "--input", str(source)]) == 1
    assert "nope.pt" in capsys.readouterr().err
    assert main(["--checkpoint", str(checkpoint), "--input", str(checkpoint)]) == 1
    assert "not valid UTF-8" in capsys.readouterr().err
    missing_input = tmp_path / "missing.en"
    assert main(["--checkpoint", str(checkpoint), "--input", str(missing_input)]) == 1
    assert "missing.en" in capsys.readouterr().err
    nbest = ["--checkpoint", str(checkpoint), "--input", str(source), "--nbest", "5"]
    assert main(nbest + ["--beam-size", "4"]) == 2  # a wrong command line
    assert "nbest (5) must be between 1 and beam_size (4)" in capsys.readouterr().err
    assert main(nbest) == 2  # against the checkpoint's beam (the paper's 4)
    assert "nbest (5) must be between 1 and beam_size (4)" in capsys.readouterr().err
    assert main(["--checkpoint", str(checkpoint), "--nbest", "2", "--greedy"]) == 2
    assert "needs beam search" in capsys.readouterr().err
    same = ["--checkpoint", str(checkpoint), "--input", str(source), "--output", str(source)]
    assert main(same) == 1
    assert "also an input" in capsys.readouterr().err
    assert source.read_text(encoding="utf-8") == "a man.\n"
    assert (
        main(["--checkpoint", str(checkpoint), "--input", str(source), "--output", str(tmp_path)])
        == 1
    )
    assert "is a directory" in capsys.readouterr().err


def test_runs_as_module():
    result = subprocess.run(
        [sys.executable, "-m", "transformer.cli.translate", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--beam-size" in result.stdout and "--length-penalty" in result.stdout


def test_unset_options_come_from_the_checkpoint_decode_section():
    args = build_parser().parse_args(["--checkpoint", "c.pt", "--length-penalty", "1.0"])
    decode = DecodeConfig(beam_size=6, length_penalty=0.2, max_len_b=20)
    assert decoding_config(args, decode) == DecodeConfig(
        beam_size=6,
        length_penalty=1.0,  # given on the command line
        length_penalty_style="gnmt",
        max_len_a=1.0,
        max_len_b=20,
        max_tokens=4096,
    )
    paper = decoding_config(build_parser().parse_args(["--checkpoint", "c.pt"]))
    assert (paper.beam_size, paper.length_penalty, paper.max_len_b) == (4, 0.6, 50)


def test_nbest_pads_to_exactly_n_lines():
    assert _exactly([("", 0.0)], 3, blank=True) == [("", 0.0)] * 3
    assert _exactly([("a", -1.0)], 3, blank=False) == [("a", -1.0)] + [("", float("-inf"))] * 2
    assert _exactly([("a", -1.0), ("b", -2.0)], 2, blank=False) == [("a", -1.0), ("b", -2.0)]


@pytest.mark.parametrize(
    "option, value",
    [
        ("--beam-size", "0"),
        ("--max-tokens", "0"),
        ("--length-penalty", "nan"),
        ("--length-penalty", "-0.5"),
        ("--max-len-a", "-1"),
        ("--max-len-b", "-1"),
    ],
)
def test_decoding_options_are_checked_before_the_model_loads(tmp_path, capsys, option, value):
    missing = str(tmp_path / "never-read.pt")
    assert main(["--checkpoint", missing, option, value]) == 2
    usage, error = capsys.readouterr().err.splitlines()[-2:]  # as argparse prints its errors
    assert usage.startswith("  ") or usage.startswith("usage: ")
    assert error.startswith(f"transformer-translate: error: {option} (")
    assert "never-read.pt" not in error


def test_unknown_device_lists_the_choices(tmp_path, capsys):
    assert main(["--checkpoint", str(tmp_path / "never-read.pt"), "--device", "foo"]) == 2
    error = capsys.readouterr().err
    assert "--device 'foo'" in error and "cpu, cuda, cuda:N or auto" in error


def test_invalid_utf8_on_stdin_names_the_line(checkpoint, monkeypatch, capsys):
    data = b"a man.\nbad \xff byte\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["--checkpoint", str(checkpoint)]) == 1
    assert "error: <stdin>: line 2 is not valid UTF-8" in capsys.readouterr().err


def test_lines_whose_output_limit_exceeds_max_positions_are_named(
    translation_model, synthetic_tokenizer, capsys
):
    translator = Translator(translation_model, synthetic_tokenizer)
    cap = translation_model.config.max_positions
    long_line = " ".join(["a man"] * cap)  # more source tokens than max_positions
    settings = {"max_len_a": 1.0, "max_len_b": 50}
    warn_capped_lines("transformer-translate", translator, ["a man.", "", long_line], settings)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("transformer-translate: warning: line 3 has ")
    assert f"limited to max_positions ({cap}) tokens" in lines[0]


def test_a_hard_link_to_the_input_is_refused_as_output(checkpoint, tmp_path, capsys):
    source = tmp_path / "input.en"
    source.write_text("a man.\n", encoding="utf-8")
    link = tmp_path / "link.en"
    os.link(source, link)
    argv = ["--checkpoint", str(checkpoint), "--input", str(source), "--output", str(link)]
    assert main(argv) == 1
    assert "also an input" in capsys.readouterr().err
    assert source.read_text(encoding="utf-8") == "a man.\n"


def test_the_file_read_from_stdin_is_refused_as_output(checkpoint, tmp_path, capsys, monkeypatch):
    source = tmp_path / "src.txt"
    source.write_text("a man.\n", encoding="utf-8")
    with open(source, encoding="utf-8") as stdin:  # `--output src.txt < src.txt`
        monkeypatch.setattr(sys, "stdin", stdin)
        assert main(["--checkpoint", str(checkpoint), "--output", str(source)]) == 1
    (error,) = capsys.readouterr().err.splitlines()
    assert error.startswith(f"transformer-translate: error: --output {source} is also the input")
    assert "stdin" in error and source.read_text(encoding="utf-8") == "a man.\n"


def test_a_dangling_link_as_output_is_refused_before_translating(
    checkpoint, tmp_path, capsys, monkeypatch
):
    source = tmp_path / "src.txt"
    source.write_text("a man.\n", encoding="utf-8")
    link = tmp_path / "out.txt"
    link.symlink_to(tmp_path / "missing" / "out.txt")
    monkeypatch.setattr(Translator, "translate", lambda *a, **k: pytest.fail("translated"))
    argv = ["--checkpoint", str(checkpoint), "--input", str(source), "--output", str(link)]
    assert main(argv) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"transformer-translate: error: --output {link} is a symbolic link")


@pytest.mark.parametrize("kernel, onednn_runs", [("torch", False), ("auto", True)])
def test_linear_kernel_option_chooses_the_products(
    checkpoint, monkeypatch, capsys, kernel, onednn_runs
):
    from transformer.cpu import onednn

    monkeypatch.setattr(onednn, "x86_64", lambda: True)
    calls = []
    real = onednn.OneDNNLinear.forward
    monkeypatch.setattr(
        onednn.OneDNNLinear, "forward", lambda self, x: calls.append(1) or real(self, x)
    )
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a man.\n")))
    assert main(["--checkpoint", str(checkpoint), "--linear-kernel", kernel, "--greedy"]) == 0
    assert bool(calls) == (onednn_runs and onednn.onednn_available())
    assert len(capsys.readouterr().out.splitlines()) == 1
    assert main(["--checkpoint", str(checkpoint), "--linear-kernel", "mkl"]) == 2


def test_the_progress_bar_goes_to_a_terminal_only(
    checkpoint, tmp_path, capsys, monkeypatch, synthetic_sentences
):
    """In a log file tqdm's carriage-return updates end as two 100% bars on one line: no bar
    there (#17, new-user pass); on a terminal it stays."""
    source, output = tmp_path / "input.en", tmp_path / "output.de"
    source.write_text("\n".join(synthetic_sentences(3, seed=1)) + "\n", encoding="utf-8")
    argv = ["--checkpoint", str(checkpoint), "--input", str(source), "--output", str(output)]
    argv += ["--max-len-b", "4", "--device", "cpu"]
    assert main(argv) == 0
    assert "\r" not in capsys.readouterr().err  # stderr is not a terminal under capsys
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(argv) == 0  # the same output file again: replaced
    assert "3/3" in capsys.readouterr().err


def test_running_out_of_memory_names_the_longest_line_of_the_chunk(
    checkpoint, tmp_path, capsys, monkeypatch
):
    def generate(self, sentences, *args, **kwargs):
        if any(len(s.split()) > 100 for s in sentences):  # what the CPU allocator raises
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to ...")
        return real_generate(self, sentences, *args, **kwargs)

    real_generate = Translator.generate
    monkeypatch.setattr(Translator, "generate", generate)
    source, output = tmp_path / "input.en", tmp_path / "output.de"
    source.write_text("a man.\n" + "a man " * 150 + "\nthe dog.\n", encoding="utf-8")
    assert (
        main(["--checkpoint", str(checkpoint), "--input", str(source), "--output", str(output)])
        == 1
    )
    err = capsys.readouterr().err
    error = err.splitlines()[-1]  # after the warning that line 2's output is capped
    assert "Traceback" not in err
    assert error.startswith("transformer-translate: error: out of memory translating lines 1-3; ")
    assert "the longest is line 2 (300 words)" in error and "--max-tokens" in error
    assert not output.exists()  # nothing half-written
