"""Tests for transformer/cli/translate.py (the transformer-translate command): the decoding
features of issue #16 (checkpoint defaults, sampling, prefixes, ensembles, alignments) and
streaming (chunks written before the next is read; a terminal answered line by line)."""

from __future__ import annotations

import io
import sys

import pytest

from transformer.cli.translate import main
from transformer.decode.config import DecodeConfig
from transformer.decode.translator import Translator


class _Stdin:
    """A stdin whose `buffer.readline` records how many output lines exist at each read."""

    def __init__(self, data: bytes, stdout: io.StringIO, tty: bool) -> None:
        self.buffer = io.BytesIO(data)
        self.written_at_read: list[int] = []
        readline = self.buffer.readline
        self.buffer.readline = lambda *a: (
            self.written_at_read.append(stdout.getvalue().count("\n")) or readline(*a)
        )
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty

    def fileno(self) -> int:
        raise OSError("no descriptor")


def _run_on_stdin(monkeypatch, argv, lines, tty=False, buffer_size=None):
    stdout = io.StringIO()
    stdin = _Stdin("".join(line + "\n" for line in lines).encode(), stdout, tty)
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", stdout)
    extra = ["--buffer-size", str(buffer_size)] if buffer_size else []
    assert main(argv + extra) == 0
    return stdout.getvalue().splitlines(), stdin.written_at_read


def test_the_checkpoints_decode_section_is_the_default_like_the_python_api(
    tmp_path, capsys, translation_model, synthetic_tokenizer, synthetic_sentences, write_checkpoint
):
    import torch

    from transformer.config import Config, config_to_dict
    from transformer.decode.beam_search import beam_search

    section = DecodeConfig(beam_size=2, max_len_b=3)
    config = config_to_dict(Config(model=translation_model.config, decode=section))
    path = write_checkpoint(
        tmp_path / "c.pt", translation_model, synthetic_tokenizer, config=config
    )
    lines = synthetic_sentences(6, seed=60)
    source = tmp_path / "in.en"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert main(["--checkpoint", str(path), "--input", str(source)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == Translator.from_checkpoint(path).translate(lines)
    reference = [
        synthetic_tokenizer.decode(
            beam_search(
                translation_model,
                torch.tensor([synthetic_tokenizer.encode(line)]),
                beam_size=2,
                max_len_b=3,
            )[0][0].tokens
        )
        for line in lines
    ]
    assert out == reference


def test_sampling_is_reproducible_whatever_the_chunks_and_matches_python(
    checkpoint, monkeypatch, synthetic_sentences
):
    lines = synthetic_sentences(5, seed=61)
    argv = [
        "--checkpoint",
        str(checkpoint),
        "--sampling",
        "--seed",
        "3",
        "--top-k",
        "8",
        "--max-len-b",
        "6",
    ]
    whole, _ = _run_on_stdin(monkeypatch, argv, lines)
    chunked, _ = _run_on_stdin(monkeypatch, argv, lines, buffer_size=2)
    assert whole == chunked
    expected = Translator.from_checkpoint(checkpoint).translate(
        lines, sampling=True, seed=3, top_k=8, max_len_b=6
    )
    assert whole == expected
    nbest, _ = _run_on_stdin(monkeypatch, argv + ["--num-samples", "3", "--nbest", "3"], lines)
    assert [int(line.split(" ||| ")[0]) for line in nbest] == [
        i for i in range(5) for _ in range(3)
    ]


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--temperature", "0.5"],
            "--temperature (0.5) applies to sampling only: set --sampling too",
        ),
        (["--greedy", "--sampling"], "--greedy and --sampling exclude each other"),
        (["--sampling", "--top-p", "2"], "--top-p (2.0) must be in [1e-06, 0.999999], or 1 (off)"),
        (
            ["--sampling", "--num-samples", "2", "--nbest", "3"],
            "nbest (3) must be between 1 and num_samples (2)",
        ),
        (["--buffer-size", "0"], "--buffer-size (0) must be at least 1"),
        # "" and "  " split every line (bad-input pass); a line break is never in a line.
        *(
            (
                ["--prefix-separator", bad],
                f"--prefix-separator {bad!r}: give text that is not only spaces, without a "
                "line break",
            )
            for bad in ("", "  ", "\n", " |\r")
        ),
        (["--alignment-layer", "0"], "--alignment-layer needs --print-alignment"),
    ],
)
def test_new_options_are_checked_before_the_model_loads(tmp_path, capsys, options, message):
    assert main(["--checkpoint", str(tmp_path / "never-read.pt"), *options]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"transformer-translate: error: {message}"


def test_prefixes_ensembles_and_alignments(
    checkpoint,
    monkeypatch,
    capsys,
    tmp_path,
    synthetic_sentences,
    make_search_model,
    synthetic_tokenizer,
    write_checkpoint,
):
    lines = synthetic_sentences(4, seed=62)
    prefixes = ["a man", "", "the", "dog"]
    argv = ["--checkpoint", str(checkpoint), "--max-len-b", "6", "--prefix-separator", " ||| "]
    out, _ = _run_on_stdin(
        monkeypatch,
        argv,
        [f"{s} ||| {p}" if p else s for s, p in zip(lines, prefixes, strict=True)],
    )
    translator = Translator.from_checkpoint(checkpoint)
    assert out == translator.translate(lines, prefix=prefixes, max_len_b=6)
    assert all(o.startswith(p) for o, p in zip(out, prefixes, strict=True))

    other = write_checkpoint(
        tmp_path / "o.pt",
        make_search_model(synthetic_tokenizer.vocab_size, seed=5),
        synthetic_tokenizer,
    )
    argv = ["--checkpoint", str(checkpoint), str(other), "--max-len-b", "6", "--print-alignment"]
    out, _ = _run_on_stdin(monkeypatch, argv, lines)
    found = Translator.from_checkpoints([checkpoint, other]).generate(
        lines, alignment=True, max_len_b=6
    )
    from transformer.decode.alignment import pharaoh

    assert out == [f"{t[0].text} ||| {pharaoh(t[0].alignment)}" for t in found]
    out, _ = _run_on_stdin(monkeypatch, argv + ["--nbest", "2", "--alignment-layer", "0"], lines)
    assert len(out) == 8 and all(len(line.split(" ||| ")) == 4 for line in out)
    assert main(argv + ["--alignment-layer", "2"]) == 2  # 2 decoder layers
    assert "--alignment-layer (2) is out of range" in capsys.readouterr().err


def test_a_line_with_two_prefix_separators_is_a_one_line_error_naming_it(
    checkpoint, tmp_path, capsys
):
    """A second separator became part of the prefix without a word (#17, bad-input pass)."""
    source, output = tmp_path / "in.en", tmp_path / "out.de"
    source.write_text("a man ||| ein\nthe dog ||| der ||| hund\n", encoding="utf-8")
    argv = ["--checkpoint", str(checkpoint), "--input", str(source), "--output", str(output)]
    assert main([*argv, "--prefix-separator", " ||| ", "--max-len-b", "4"]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert f"{source}, line 2: --prefix-separator ' ||| ' occurs 2 times" in error
    assert not output.exists()  # nothing half-written
    assert main([*argv, "--prefix-separator", " |||| ", "--max-len-b", "4"]) == 0
    assert len(output.read_text(encoding="utf-8").splitlines()) == 2


def test_chunks_are_written_before_the_next_is_read_and_a_terminal_goes_line_by_line(
    checkpoint, monkeypatch, capsys, synthetic_sentences, tmp_path
):
    lines = synthetic_sentences(6, seed=63)
    argv = ["--checkpoint", str(checkpoint), "--max-len-b", "6", "--greedy"]
    whole, _ = _run_on_stdin(monkeypatch, argv, lines)
    chunked, reads = _run_on_stdin(monkeypatch, argv, lines, buffer_size=4)
    assert chunked == whole and len(whole) == 6
    assert reads == [0, 0, 0, 0, 4, 4, 4]  # lines 5 and 6 (and EOF) read after 4 were written
    typed, reads = _run_on_stdin(monkeypatch, argv, lines, tty=True)
    assert typed == whole and reads == list(range(7))  # each line answered before the next
    assert capsys.readouterr().err.count("> ") == 7  # a prompt before every read, on stderr
    source, output = tmp_path / "in.en", tmp_path / "out.de"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    assert main(argv + ["--input", str(source), "--output", "-", "--buffer-size", "2"]) == 0
    assert stdout.getvalue().splitlines() == whole
    assert main(argv + ["--input", str(source), "--output", str(output), "--buffer-size", "5"]) == 0
    assert output.read_text(encoding="utf-8").splitlines() == whole
