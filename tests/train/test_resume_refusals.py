"""Tests for transformer/train/checkpoints.py and the trainer's resume: what a fresh start sets
aside, and the run directories that cannot be resumed (each refused with a one-line error that
names the checkpoint)."""

from __future__ import annotations

import re

import pytest

from transformer.checkpoint import read_checkpoint, save_checkpoint


def test_fresh_start_sets_the_earlier_run_aside(tmp_path, tiny_run):
    from transformer.train.trainer import Trainer

    run_dir = tmp_path / "run"
    common = [*tiny_run.fast, f"train.output_dir={run_dir}", "train.save_interval_steps=1"]
    Trainer(tiny_run.load([*common, "train.max_steps=4"])).train()
    Trainer(tiny_run.load([*common, "train.max_steps=2"]), resume=False).train()
    numbered = sorted(p.name for p in run_dir.glob("checkpoint_[0-9]*.pt"))
    assert numbered == ["checkpoint_1.pt", "checkpoint_2.pt"]  # nothing left from the first run
    (aside,) = run_dir.glob("previous-*")
    assert (aside / "checkpoint_4.pt").is_file() and (aside / "metrics.jsonl").is_file()
    assert [r["step"] for r in tiny_run.records(run_dir)] == [1, 2]


def test_resuming_from_an_averaged_checkpoint_is_a_clear_error(tmp_path, tiny_run):
    from transformer.train.trainer import Trainer

    run_dir = tmp_path / "run"
    overrides = [*tiny_run.fast, f"train.output_dir={run_dir}", "train.max_steps=2"]
    Trainer(tiny_run.load(overrides)).train()
    state = read_checkpoint(run_dir / "checkpoint_last.pt")
    for key in ("optimizer", "lr_scheduler", "data_position", "train_state"):
        del state[key]  # what transformer-average keeps: weights, configs, vocabulary
    save_checkpoint(state, run_dir / "checkpoint_last.pt")
    with pytest.raises(ValueError, match=r"checkpoint_last\.pt cannot be resumed: it has no "):
        Trainer(tiny_run.load([*overrides, "train.max_steps=3"]))


def test_resuming_with_another_sentencepiece_model_is_refused(tmp_path, tiny_run):
    """A run directory whose spm.model was replaced (the vocabulary-size error advises deleting
    it) would resume with token ids that mean other pieces: refused, naming the checkpoint."""
    import shutil

    from transformer.train.trainer import Trainer

    run_dir, other = tmp_path / "run", tmp_path / "other"
    common = [*tiny_run.fast, "train.max_steps=2"]
    Trainer(tiny_run.load([*common, f"train.output_dir={run_dir}"])).train()
    unigram = [*common, f"train.output_dir={other}", "data.spm_model_type=unigram"]
    Trainer(tiny_run.load(unigram)).train()
    shutil.copy(other / "spm.model", run_dir / "spm.model")  # same size, other pieces
    resume = [*common, f"train.output_dir={run_dir}", "train.max_steps=3"]
    with pytest.raises(FileExistsError, match="holds checkpoints"):  # spm.json: another model
        Trainer(tiny_run.load(resume))
    (run_dir / "spm.json").unlink()  # a run directory from before spm.json: sizes only
    last = run_dir / "checkpoint_last.pt"
    with pytest.raises(ValueError, match=rf"^{re.escape(str(last))} was trained with another "):
        Trainer(tiny_run.load([*common, f"train.output_dir={run_dir}", "train.max_steps=3"]))
