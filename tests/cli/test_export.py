"""Tests for transformer/cli/export.py (the transformer-export command): exports that pass their
parity check are written, anything else leaves nothing behind; exit codes as every command's."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("ctranslate2")
transformers = pytest.importorskip("transformers")

from transformer.cli import export as export_cli  # noqa: E402
from transformer.cli.export import main  # noqa: E402
from transformer.export.parity import ParityResult  # noqa: E402


@pytest.fixture
def checkpoint(tmp_path, make_search_model, synthetic_tokenizer, write_checkpoint):
    """A random model with sharpened outputs (embeddings x 3): few near-tied beams and little
    probability on <pad> and <s>, as after training (transformer.export.ctranslate2_translate)."""
    model = make_search_model(synthetic_tokenizer.vocab_size)
    with torch.no_grad():
        model.tgt_embed.weight.mul_(3.0)
    return str(write_checkpoint(tmp_path / "model.pt", model, synthetic_tokenizer))


def leftovers(directory) -> list[str]:
    return [p.name for p in directory.iterdir() if ".partial-" in p.name]


def test_ctranslate2_export_is_checked_then_written(checkpoint, tmp_path, capsys):
    out = tmp_path / "ct2"
    assert main(["--checkpoint", checkpoint, "--to", "ctranslate2", "--output", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ctranslate2 float32, greedy: 8 sentences, 8 identical")
    assert lines[1].startswith("ctranslate2 float32, beam 4") and lines[1].endswith("%)")
    assert lines[2].endswith("(ctranslate2, parity checked)")
    assert {"model.bin", "config.json", "spm.model", "export.json"} <= {
        p.name for p in out.iterdir()
    }
    report = json.loads((out / "export.json").read_text())
    assert report["checked"] and report["report"] == lines[:2]
    assert report["decoding"]["length_penalty_style"] == "power"
    assert not leftovers(tmp_path)


def test_int8_export_checks_a_float32_twin_too(checkpoint, tmp_path, capsys):
    out = tmp_path / "int8"
    argv = ["--checkpoint", checkpoint, "--to", "ctranslate2", "--output", str(out)]
    assert main([*argv, "--quantization", "int8", "--beam-size", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(",")[0] for line in lines[:4]] == ["ctranslate2 float32"] * 2 + [
        "ctranslate2 int8"
    ] * 2
    assert json.loads((out / "export.json").read_text())["quantization"] == "int8"


def test_huggingface_export_with_a_check_file(checkpoint, tmp_path, capsys, synthetic_sentences):
    check = tmp_path / "check.txt"
    check.write_text("\n".join(synthetic_sentences(12, seed=2)) + "\n\n")
    out = tmp_path / "hf"
    argv = ["--checkpoint", checkpoint, "--to", "huggingface", "--output", str(out)]
    assert main([*argv, "--check-input", str(check)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    # One line per check, without transformers' own progress bars ("Loading weights: 100%|").
    assert "%|" not in captured.err
    assert transformers.utils.logging.is_progress_bar_enabled()  # restored for Python callers
    assert lines[0].startswith("huggingface tokenizer: 12 sentences, 12 identical")
    assert "max logit difference" in lines[1] and lines[2].startswith("huggingface float32, greedy")
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()


def test_a_failed_check_writes_nothing(checkpoint, tmp_path, capsys, monkeypatch):
    failing = ParityResult("ctranslate2 float32, greedy", 8, 5, 0.3, "log-prob", False, "x")
    monkeypatch.setattr(export_cli, "check_ctranslate2", lambda *args, **kwargs: [failing])
    out = tmp_path / "ct2"
    assert main(["--checkpoint", checkpoint, "--to", "ctranslate2", "--output", str(out)]) == 1
    error = capsys.readouterr().err
    assert "parity check failed, nothing written" in error and "MISMATCH" in error
    assert not out.exists() and not leftovers(tmp_path)


def test_an_existing_output_needs_force(checkpoint, tmp_path, capsys):
    out = tmp_path / "ct2"
    out.mkdir()
    (out / "old").write_text("x")
    argv = ["--checkpoint", checkpoint, "--to", "ctranslate2", "--output", str(out), "--no-check"]
    assert main(argv) == 1
    assert "exists; pass --force" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
    assert "parity NOT checked (--no-check)" in capsys.readouterr().out
    assert not (out / "old").exists() and (out / "model.bin").is_file()


def test_force_never_deletes_the_checkpoint_being_exported(checkpoint, tmp_path, capsys):
    """--output naming the checkpoint's own folder (a run directory) with --force would delete
    the checkpoints before the export is written."""
    argv = ["--checkpoint", checkpoint, "--to", "ctranslate2", "--output", str(tmp_path)]
    assert main([*argv, "--no-check", "--force"]) == 1
    assert "holds the checkpoint" in capsys.readouterr().err
    assert Path(checkpoint).is_file()


def test_force_never_deletes_the_current_directory_or_the_check_files(
    checkpoint, tmp_path, capsys, monkeypatch
):
    """`--output . --force` emptied the current directory after the check, and `--check-input`
    inside `--output` was deleted with it (#17, bad-input pass): both are refused first."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "precious.txt").write_text("keep me")
    monkeypatch.chdir(work)
    argv = ["--checkpoint", checkpoint, "--to", "ctranslate2", "--force"]
    for output in (".", str(tmp_path)):  # the current directory, and a folder above it
        assert main([*argv, "--output", output]) == 1
        error = capsys.readouterr().err
        assert error.count("\n") == 1
        assert f"--output {output} holds the current directory" in error
    assert (work / "precious.txt").read_text() == "keep me"
    out = tmp_path / "out"
    out.mkdir()
    (out / "input.en").write_text("a man is eating .\n")
    check = ["--output", str(out), "--check-input", str(out / "input.en")]
    monkeypatch.chdir(tmp_path.parent)
    assert main([*argv, *check]) == 1
    assert f"holds --check-input ({out / 'input.en'})" in capsys.readouterr().err
    assert (out / "input.en").is_file()


def test_an_empty_check_input_is_named(checkpoint, tmp_path, capsys):
    (tmp_path / "empty.en").write_text("\n  \n")
    argv = ["--checkpoint", checkpoint, "--to", "ctranslate2", "--output", str(tmp_path / "o")]
    assert main([*argv, "--check-input", str(tmp_path / "empty.en")]) == 1
    assert f"--check-input {tmp_path / 'empty.en'} has no sentence" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_symbolic_link_or_a_file_as_output_is_refused_before_any_work(
    checkpoint, tmp_path, capsys, monkeypatch
):
    """A linked --output failed only at the end ("Cannot call rmtree on a symbolic link"), a
    file as its parent was called a missing directory."""
    monkeypatch.setattr(export_cli, "load_checkpoint", lambda path: pytest.fail("no work"))
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "afile").write_text("x")
    argv = ["--checkpoint", checkpoint, "--to", "ctranslate2", "--force", "--output"]
    for name in ("link", "dangling"):
        assert main([*argv, str(tmp_path / name)]) == 1
        assert f"--output {tmp_path / name} is a symbolic link" in capsys.readouterr().err
    assert main([*argv, str(tmp_path / "afile" / "x")]) == 1
    assert f"{tmp_path / 'afile'} is not a directory" in capsys.readouterr().err
    assert (tmp_path / "real").is_dir() and not (tmp_path / "nowhere").exists()


def test_the_exported_folder_is_readable_as_the_umask_allows(checkpoint, tmp_path):
    out = tmp_path / "ct2"
    previous = os.umask(0o022)
    try:
        argv = ["--checkpoint", checkpoint, "--to", "ctranslate2", "--output", str(out)]
        assert main([*argv, "--no-check"]) == 0
    finally:
        os.umask(previous)
    assert out.stat().st_mode & 0o777 == 0o755  # mkdtemp alone gives 0o700


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--to", "huggingface", "--quantization", "int8"], "--to ctranslate2 only"),
        (["--to", "ctranslate2", "--check-reference", "r.txt"], "needs --check-input"),
        (["--to", "ctranslate2", "--no-check", "--check-input", "x"], "need --check"),
        (["--to", "ctranslate2", "--min-identical", "2"], "--min-identical (2.0)"),
        (["--to", "ctranslate2", "--max-bleu-drop", "nan"], "--max-bleu-drop (nan)"),
        (["--to", "onnx"], "invalid choice"),
    ],
)
def test_a_wrong_command_line_exits_2(checkpoint, tmp_path, capsys, extra, message):
    assert main(["--checkpoint", checkpoint, "--output", str(tmp_path / "o"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_missing_extra_is_one_line_naming_it(checkpoint, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    out = tmp_path / "ct2"
    assert main(["--checkpoint", checkpoint, "--to", "ctranslate2", "--output", str(out)]) == 1
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "'export' extra" in error and '".[export]"' in error
    assert not out.exists() and not leftovers(tmp_path)


def test_a_model_marian_cannot_hold_fails_before_any_work(
    tmp_path, capsys, make_search_model, synthetic_tokenizer, write_checkpoint
):
    model = make_search_model(synthetic_tokenizer.vocab_size, norm_first=True)
    path = write_checkpoint(tmp_path / "pre.pt", model, synthetic_tokenizer)
    argv = ["--checkpoint", str(path), "--to", "huggingface", "--output", str(tmp_path / "hf")]
    assert main(argv) == 1
    assert "pre-norm" in capsys.readouterr().err and not leftovers(tmp_path)
