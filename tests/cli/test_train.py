"""Tests for transformer/cli/train.py (the transformer-train command), on configs/tiny.yaml and a
slice of Multi30k (CPU, seconds)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.fixtures.runs import TinyRun
from transformer.checkpoint import read_checkpoint
from transformer.cli.train import main
from transformer.config import load_config

REPO = Path(__file__).resolve().parents[2]


def test_tiny_config_trains_and_the_loss_falls(tmp_path, tiny_run):
    run_dir = tmp_path / "run"
    argv = ["--config", str(tiny_run.config_path), f"train.output_dir={run_dir}"]
    assert main([*argv, "train.valid_bleu_sentences=20"]) == 0
    records = tiny_run.records(run_dir)
    assert records[-1]["step"] == 100
    assert records[-1]["loss"] < records[0]["loss"] - 1.0
    for record in records:
        assert {"step", "loss", "lr", "tokens_per_second"} <= record.keys()
    valid = tiny_run.records(run_dir, "valid")
    assert [r["step"] for r in valid] == [50, 100]
    assert valid[-1]["loss"] < valid[0]["loss"]
    assert {"bleu", "ppl", "elapsed_minutes"} <= valid[-1].keys()
    names = {p.name for p in run_dir.iterdir()}
    assert {"config.yaml", "spm.model", "checkpoint_last.pt", "checkpoint_best.pt"} <= names
    assert {"checkpoint_50.pt", "checkpoint_100.pt"} <= names
    assert load_config(run_dir / "config.yaml").model.vocab_size == 1000
    checkpoint = torch.load(run_dir / "checkpoint_last.pt", weights_only=True)
    assert checkpoint["step"] == 100
    assert not any(k.startswith(("module.", "_orig_mod.")) for k in checkpoint["model"])


def test_nonfinite_loss_stops_with_the_step_and_keeps_the_last_checkpoint(
    tmp_path, tiny_run, capsys
):
    run_dir = tmp_path / "run"
    # A huge rate blows the weights up after the first update, so step 2's loss is not finite.
    argv = ["--config", str(tiny_run.config_path), *tiny_run.fast, f"train.output_dir={run_dir}"]
    argv += ["train.lr_scale=1e30", "train.save_interval_steps=1", "train.max_steps=5"]
    assert main(argv) == 1
    error = capsys.readouterr().err
    assert "non-finite loss" in error and "at step 2" in error and "checkpoint_last.pt" in error
    assert read_checkpoint(run_dir / "checkpoint_last.pt")["step"] == 1


def test_unknown_key_and_wrong_type_are_reported(tiny_run, capsys):
    config = str(tiny_run.config_path)
    assert main(["--config", config, "train.max_stepz=3"]) == 2
    error = capsys.readouterr().err
    assert "train.max_stepz" in error and "max_steps" in error and "warmup_steps" in error
    assert main(["--config", config, "train.max_steps=many"]) == 2
    assert "train.max_steps" in capsys.readouterr().err


def test_output_dir_under_a_regular_file_names_train_output_dir(tmp_path, tiny_run, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    argv = ["--config", str(tiny_run.config_path), f"train.output_dir={blocker / 'run'}"]
    assert main([*argv, "train.device=cpu"]) == 1  # the work cannot be done (one line, no usage)
    error = capsys.readouterr().err.strip()
    assert error.startswith("transformer-train: error: train.output_dir")
    assert "cannot be created" in error and "\n" not in error


@pytest.mark.parametrize("override", ["train.max_steps=[1", "train.max_steps=@x"])
def test_an_override_that_is_not_yaml_is_a_one_line_usage_error(tiny_run, capsys, override):
    assert main(["--config", str(tiny_run.config_path), override]) == 2
    usage, *_, error = capsys.readouterr().err.splitlines()
    assert usage.startswith("usage: transformer-train")
    assert error.startswith(f"transformer-train: error: command-line override '{override}': ")
    assert "not valid YAML" in error


def test_an_invalid_yaml_config_is_a_one_line_usage_error(tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_text("train:\n  max_steps: [1\n")
    assert main(["--config", str(config)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("usage: transformer-train")
    assert lines[-1].startswith(f"transformer-train: error: {config}: invalid YAML: ")
    assert lines[-1].endswith("(line 3, column 1)")  # where the problem is, on the same line


def test_print_config_shows_the_resolved_config_with_defaults_marked(tmp_path, capsys):
    """What --print-config prints loads back as the same config (the reference: load_config
    of the file and overrides), and the keys neither sets are marked."""
    path = tmp_path / "only.yaml"
    path.write_text("model:\n  d_model: 64\n")
    assert main(["--config", str(path), "--print-config", "train.max_steps=7"]) == 0
    text = capsys.readouterr().out
    printed = tmp_path / "printed.yaml"
    printed.write_text(text)
    assert load_config(printed) == load_config(path, ["train.max_steps=7"])
    lines = text.splitlines()
    assert "  d_model: 64" in lines and "  max_steps: 7" in lines  # set: no mark
    assert "  n_encoder_layers: 6  # default" in lines and "  d_ff: 2048  # default" in lines
    assert not (tmp_path / "checkpoints").exists()  # nothing trained
    # The vocabulary sizes are the SentencePiece model's, not a default that training uses.
    model, data = lines[: lines.index("data:")], lines[lines.index("data:") :]
    (vocab,) = [line for line in model if line.startswith("  vocab_size: 37000")]
    assert "# default" not in vocab and "SentencePiece" in vocab
    assert "  vocab_size: 37000  # default" in data  # what training gives SentencePiece
    assert "  share_embeddings: true  # default" in model


def test_print_config_says_separate_vocabularies_share_no_embeddings(tmp_path, capsys):
    """With data.shared_vocab false training unties the embeddings (trainer.model_config_for):
    --print-config said `share_embeddings: true` (bad-input pass, #17)."""
    path = tmp_path / "only.yaml"
    path.write_text("model:\n  d_model: 64\n")
    assert main(["--config", str(path), "--print-config", "data.shared_vocab=false"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (line,) = [x for x in lines if x.startswith("  share_embeddings: ")]
    assert line == "  share_embeddings: true  # set by training: false (data.shared_vocab false)"


def test_print_config_refuses_a_device_name_as_training_does(tmp_path, capsys):
    """train.device is checked when the config loads, so --print-config does not show a
    config that training then refuses (the device's presence is checked when a run starts)."""
    path = tmp_path / "only.yaml"
    path.write_text("model:\n  d_model: 64\n")
    assert main(["--config", str(path), "--print-config", "train.device=tpu"]) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("transformer-train: error: ") and "train.device 'tpu'" in last
    assert main(["--config", str(path), "--print-config", "train.device=cuda:1"]) == 0


def test_every_run_names_the_model_keys_it_takes_from_defaults(tmp_path, tiny_run, capsys):
    path = tmp_path / "only.yaml"
    path.write_text("model:\n  d_model: 32\n  n_heads: 2\n")
    argv = ["--config", str(path), *tiny_run.fast, f"train.output_dir={tmp_path / 'run'}"]
    argv += ["data.train=multi30k/val", "data.vocab_size=300", "train.max_steps=1"]
    argv += ["train.max_tokens=512", "train.device=cpu", "model.n_encoder_layers=1"]
    argv += ["model.n_decoder_layers=1", "model.d_ff=64"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    (line,) = [x for x in (captured.out + captured.err).splitlines() if "from defaults" in x]
    assert line.startswith(f"config {path}: model and data keys from defaults: ")
    assert "model.dropout=0.1" in line and "data.max_len=256" in line
    assert "model.d_model" not in line and "model.n_encoder_layers" not in line


def test_a_vocab_size_the_sentencepiece_model_replaces_is_named(tmp_path, tiny_run, capsys):
    argv = ["--config", str(tiny_run.config_path), *tiny_run.fast, "train.max_steps=1"]
    argv += ["data.train=multi30k/val", "data.vocab_size=300"]
    assert main([*argv, f"train.output_dir={tmp_path / 'a'}", "model.vocab_size=500"]) == 0
    captured = capsys.readouterr()
    (line,) = [x for x in (captured.out + captured.err).splitlines() if "replaced" in x]
    assert line == (
        "config model.vocab_size=500 is replaced by 300, the size of the SentencePiece model "
        "(the vocabulary to train is data.vocab_size)"
    )
    assert main([*argv, f"train.output_dir={tmp_path / 'b'}"]) == 0  # the default: no line
    captured = capsys.readouterr()
    assert "replaced" not in captured.out + captured.err


# The training command of the signal tests, and the run it makes when never stopped.
SIGNAL_RUN = ["-m", "transformer.train", "--config", str(TinyRun.config_path), *TinyRun.fast]
SIGNAL_RUN += ["train.max_steps=40", "train.save_interval_steps=1000"]


@pytest.fixture(scope="module")
def straight(tmp_path_factory, shared_data) -> Path:
    """The run directory of SIGNAL_RUN never stopped (one reference for both signals)."""
    run_dir = tmp_path_factory.mktemp("straight")
    TinyRun(shared_data).python([*SIGNAL_RUN, f"train.output_dir={run_dir}"])
    return run_dir


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_and_sigterm_save_say_how_to_resume_and_resume_exactly(
    tmp_path, tiny_run, straight, sig, status
):
    """The first signal finishes the current update and writes checkpoint_last.pt (one line
    says so, no traceback); rerunning the command continues to the same weights as a run that
    was never stopped (the reference)."""
    common, stopped = SIGNAL_RUN, tmp_path / "stopped"
    env = {**os.environ, "TRANSFORMER_DATA_DIR": str(tiny_run.shared_data), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, *common, f"train.output_dir={stopped}"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    metrics = stopped / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while not (metrics.is_file() and metrics.read_text().count("\n") >= 3):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(sig)
    out, err = process.communicate(timeout=60)
    assert process.returncode == status, err[-2000:]
    assert "Traceback" not in err
    again = " (Ctrl-C again to abort)" if sig == signal.SIGINT else ""
    assert f"{sig.name}: stopping after this update{again}\n" in err
    step = read_checkpoint(stopped / "checkpoint_last.pt")["step"]
    assert 3 <= step < 40
    line = f"{sig.name}: stopped after step {step}, {stopped / 'checkpoint_last.pt'} written; "
    assert line + "rerun the same command to resume" in out + err
    assert not list(stopped.glob("checkpoint_[0-9]*.pt"))  # the numbered ones keep their interval
    tiny_run.python([*common, f"train.output_dir={stopped}"])
    a = read_checkpoint(straight / "checkpoint_last.pt")
    b = read_checkpoint(stopped / "checkpoint_last.pt")
    assert a["step"] == b["step"] == 40
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key


def test_overrides_may_follow_the_options(tmp_path, capsys):
    path = tmp_path / "only.yaml"
    path.write_text("model:\n  d_model: 64\n")
    argv = ["--config", str(path), "train.seed=2", "--print-config", "train.max_steps=3"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  seed: 2" in lines and "  max_steps: 3" in lines


def test_the_saved_config_resumes_the_run_from_any_directory(tmp_path, tiny_run, monkeypatch):
    # Relative corpus prefixes (resolved against TRANSFORMER_DATA_DIR) and a relative run
    # directory: the saved config holds what they resolved to, so it works from elsewhere.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").symlink_to(tiny_run.shared_data)
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", "data")  # relative too
    argv = ["--config", str(tiny_run.config_path), *tiny_run.fast, "train.output_dir=run"]
    assert main([*argv, "train.max_steps=2", "train.save_interval_steps=2"]) == 0
    saved = load_config(tmp_path / "run" / "config.yaml")
    assert saved.data.train == str(tmp_path / "data" / "multi30k" / "train")
    assert saved.train.output_dir == str(tmp_path / "run")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("TRANSFORMER_DATA_DIR")
    saved_path = str(tmp_path / "run" / "config.yaml")
    assert main(["--config", saved_path, "train.max_steps=3"]) == 0
    assert [r["step"] for r in tiny_run.records(tmp_path / "run")] == [1, 2, 3]
    assert not any(elsewhere.iterdir())  # nothing written where it was started


def test_resuming_with_another_model_size_names_the_keys(tmp_path, tiny_run, capsys):
    run_dir = tmp_path / "run"
    argv = ["--config", str(tiny_run.config_path), *tiny_run.fast, f"train.output_dir={run_dir}"]
    assert main([*argv, "train.max_steps=1", "train.save_interval_steps=1"]) == 0
    capsys.readouterr()
    assert main([*argv, "train.max_steps=2", "model.d_model=32", "model.d_ff=64"]) == 1
    error = capsys.readouterr().err.strip()
    assert "model.d_model: 64 there, 32 now" in error and "model.d_ff: 128 there, 64 now" in error
    assert len(error) < 400 and "\n" not in error


def test_after_no_resume_the_interrupt_line_says_to_rerun_without_it(tmp_path, tiny_run):
    """The same command with --no-resume would start over and set the checkpoint just written
    aside (#17, new-user pass): the line says to drop the flag."""
    run_dir = tmp_path / "run"
    argv = ["-m", "transformer.train", "--config", str(tiny_run.config_path), *tiny_run.fast]
    argv += ["train.max_steps=400", f"train.output_dir={run_dir}", "--no-resume"]
    env = {**os.environ, "TRANSFORMER_DATA_DIR": str(tiny_run.shared_data), "OMP_NUM_THREADS": "1"}
    pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process = subprocess.Popen([sys.executable, *argv], cwd=REPO, env=env, **pipes)
    metrics, deadline = run_dir / "metrics.jsonl", time.monotonic() + 120
    while not (metrics.is_file() and metrics.read_text().count("\n") >= 3):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err[-2000:]
    assert "written; rerun it without --no-resume / --fresh to resume" in out + err
