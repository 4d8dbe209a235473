"""Tests for transformer/cli/average.py (the transformer-average command).

Inputs hold one constant in every parameter (`write_filled_checkpoint`), so the averaged
model's weights have a closed form; the averaging itself is tested in tests/train/test_average.py.
"""

from __future__ import annotations

import pytest
import torch

from transformer.checkpoint import load_checkpoint
from transformer.cli import average as cli_average
from transformer.cli.average import main


def test_result_is_loadable_and_cli_last_n(
    tmp_path, write_filled_checkpoint, model_config, tiny_tokenizer
):
    run = tmp_path / "run"
    run.mkdir()
    for step, fill in ((100, 5.0), (200, 1.0), (300, 3.0)):
        write_filled_checkpoint(run / f"checkpoint_{step}.pt", fill, step)
    output = tmp_path / "avg.pt"
    assert main(["--last", "2", "--dir", str(run), "--output", str(output)]) == 0
    model, tokenizer, config = load_checkpoint(output)
    assert torch.all(model.src_embed.weight == 2.0)
    assert config.model == model_config(tiny_tokenizer.vocab_size)
    assert tokenizer.src_model_bytes == tiny_tokenizer.src_model_bytes
    inputs = [str(run / "checkpoint_100.pt"), str(run / "checkpoint_200.pt")]
    assert main(["--inputs", *inputs, "--output", str(output)]) == 0
    assert torch.all(load_checkpoint(output)[0].src_embed.weight == 3.0)


def test_mismatched_checkpoints_are_one_error_line(tmp_path, write_filled_checkpoint, capsys):
    a = write_filled_checkpoint(tmp_path / "a.pt", 1.0, 1)
    c = write_filled_checkpoint(tmp_path / "c.pt", 1.0, 3, weights={"extra.buffer": torch.zeros(2)})
    assert main(["--inputs", str(a), str(c), "--output", str(tmp_path / "x.pt")]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("transformer-average: error: ") and "extra.buffer" in line
    assert main(["--last", "5", "--dir", str(tmp_path), "--output", str(tmp_path / "y.pt")]) == 1
    assert "fewer than --last 5" in capsys.readouterr().err
    assert not (tmp_path / "x.pt").exists() and not (tmp_path / "y.pt").exists()


def test_a_missing_run_directory_is_named_as_missing(tmp_path, capsys):
    """It said "holds 0 numbered checkpoints", as if the folder existed (#17, new-user pass)."""
    missing = tmp_path / "no-such-run"
    assert main(["--last", "5", "--dir", str(missing), "--output", str(tmp_path / "a.pt")]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"transformer-average: error: no such run directory: {missing}"


def test_an_output_in_a_missing_directory_or_a_directory_is_refused(
    tmp_path, write_filled_checkpoint, capsys, monkeypatch
):
    a = write_filled_checkpoint(tmp_path / "a.pt", 1.0, 1)
    monkeypatch.setattr(cli_average, "average_checkpoints", lambda p: pytest.fail("averaged"))
    output = tmp_path / "new" / "dir" / "avg.pt"
    assert main(["--inputs", str(a), "--output", str(output)]) == 1  # no silent mkdir -p
    (error,) = capsys.readouterr().err.splitlines()
    assert error == (
        f"transformer-average: error: --output {output}: the directory {output.parent} "
        "does not exist (create it first)"
    )
    assert not (tmp_path / "new").exists()
    assert main(["--inputs", str(a), "--output", str(tmp_path)]) == 1
    assert f"--output {tmp_path} is a directory" in capsys.readouterr().err


def test_output_never_replaces_an_input_or_a_training_checkpoint(
    tmp_path, write_filled_checkpoint, capsys
):
    a = write_filled_checkpoint(tmp_path / "checkpoint_1.pt", 1.0, 1)
    b = write_filled_checkpoint(tmp_path / "checkpoint_2.pt", 3.0, 2)
    before = {p: p.read_bytes() for p in (a, b)}
    assert main(["--inputs", str(a), str(b), "--output", str(b)]) == 1
    assert "is also an input of this command" in capsys.readouterr().err
    for name in ("checkpoint_last.pt", "checkpoint_7.pt"):
        assert main(["--inputs", str(a), str(b), "--output", str(tmp_path / name)]) == 2
        assert "a name training writes and resumes from" in capsys.readouterr().err
        assert not (tmp_path / name).exists()
    assert {p: p.read_bytes() for p in (a, b)} == before


def test_a_dangling_link_as_output_is_refused_before_averaging(
    tmp_path, write_filled_checkpoint, capsys, monkeypatch
):
    a = write_filled_checkpoint(tmp_path / "a.pt", 1.0, 1)
    link = tmp_path / "avg.pt"
    link.symlink_to(tmp_path / "missing" / "avg.pt")
    monkeypatch.setattr(cli_average, "average_checkpoints", lambda p: pytest.fail("averaged"))
    assert main(["--inputs", str(a), "--output", str(link)]) == 1
    (error,) = capsys.readouterr().err.splitlines()
    assert error.startswith(f"transformer-average: error: --output {link} is a symbolic link")


def test_names_of_one_file_are_averaged_once_and_said_so(tmp_path, write_filled_checkpoint, capsys):
    """checkpoint_last.pt is a hard link of the newest numbered checkpoint: averaging both
    names would weigh that checkpoint twice (the mean of 1, 3, 3 instead of 1, 3)."""
    first = write_filled_checkpoint(tmp_path / "checkpoint_10.pt", 1.0, 10)
    newest = write_filled_checkpoint(tmp_path / "checkpoint_20.pt", 3.0, 20)
    last = tmp_path / "checkpoint_last.pt"
    last.hardlink_to(newest)
    output = tmp_path / "avg.pt"
    argv = ["--inputs", str(first), str(newest), str(last), str(first), "--output", str(output)]
    assert main(argv) == 0
    assert torch.all(load_checkpoint(output)[0].src_embed.weight == 2.0)
    captured = capsys.readouterr()
    assert (
        f"transformer-average: warning: {last} is the same file as {newest}: averaged once"
        in captured.err
    )
    assert f"{first} is the same file as {first}: averaged once" in captured.err
    assert "averaged 2 checkpoints" in captured.out


def test_a_missing_input_is_one_line(tmp_path, write_filled_checkpoint, capsys):
    first = write_filled_checkpoint(tmp_path / "a.pt", 1.0, 1)
    argv = ["--inputs", str(first), str(tmp_path / "gone.pt"), "--output", str(tmp_path / "x.pt")]
    assert main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"transformer-average: error: checkpoint not found: {tmp_path / 'gone.pt'}"


def test_an_output_that_links_to_a_training_checkpoint_is_refused(
    tmp_path, write_filled_checkpoint
):
    """`latest.pt -> checkpoint_last.pt` as --output would replace the checkpoint that
    training resumes from (the averaged one has no optimizer state)."""
    a = write_filled_checkpoint(tmp_path / "checkpoint_1.pt", 1.0, 1)
    last = write_filled_checkpoint(tmp_path / "checkpoint_last.pt", 3.0, 2)
    link = tmp_path / "latest.pt"
    link.symlink_to(last.name)
    before = last.read_bytes()
    assert main(["--inputs", str(a), "--output", str(link)]) == 2
    assert last.read_bytes() == before


def test_dir_with_inputs_is_a_usage_error_and_one_input_is_named_singular(
    tmp_path, write_filled_checkpoint, capsys
):
    """`--dir` only says where `--last` looks: given with `--inputs` it would be ignored."""
    first = write_filled_checkpoint(tmp_path / "a.pt", 1.0, 1)
    output = tmp_path / "x.pt"
    argv = ["--inputs", str(first), "--dir", str(tmp_path), "--output", str(output)]
    assert main(argv) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == (
        "transformer-average: error: --dir goes with --last; --inputs names the checkpoints itself"
    )
    assert not output.exists()
    assert main(["--inputs", str(first), "--output", str(output)]) == 0
    assert capsys.readouterr().out == f"averaged 1 checkpoint -> {output}\n"
