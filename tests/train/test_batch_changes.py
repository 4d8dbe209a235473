"""Tests for transformer/train/batch_changes.py: resuming after the batches are cut differently.

The reference for the unit tests is the rule itself, written out (the keys that changed, the
next epoch's start); the run test is the new-user report of issue 17: resuming with a larger
`train.max_tokens` failed with "data position ... is outside epoch 1".
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from transformer.config import Config, config_to_dict
from transformer.train.batch_changes import batching_changes, resume_position


def checkpoint_of(config: Config, world_size: int = 1, epoch: int = 3, index: int = 7) -> dict:
    """The entries of a training checkpoint that the rule reads."""
    position = {"epoch": epoch, "index": index}
    return {"config": config_to_dict(config), "world_size": world_size, "data_position": position}


def test_the_same_batching_keeps_the_saved_position():
    config = Config()
    checkpoint = checkpoint_of(config)
    assert batching_changes(checkpoint, config, 1) == []
    assert resume_position(checkpoint, config, 1) == ({"epoch": 3, "index": 7}, None)
    # Settings that do not cut batches (the model's dropout, the rate) change nothing.
    other = dataclasses.replace(config, train=dataclasses.replace(config.train, lr_scale=2.0))
    assert resume_position(checkpoint, other, 1)[1] is None


@pytest.mark.parametrize(
    "section, key, value",
    [
        ("train", "max_tokens", 128),
        ("train", "update_freq", 3),
        ("train", "seed", 9),
        ("data", "max_len", 17),
        ("data", "train", "elsewhere/train"),
        ("data", "bpe_dropout", 0.1),
    ],
)
def test_each_batching_key_moves_the_run_to_the_next_epoch_and_is_named(section, key, value):
    config = Config()
    checkpoint = checkpoint_of(config)
    part = dataclasses.replace(getattr(config, section), **{key: value})
    changed = dataclasses.replace(config, **{section: part})
    before = getattr(getattr(config, section), key)
    assert batching_changes(checkpoint, changed, 1) == [
        f"{section}.{key}: {before!r} there, {value!r} now"
    ]
    position, line = resume_position(checkpoint, changed, 1)
    assert position == {"epoch": 4, "index": 0}
    assert f"{section}.{key}: {before!r} there, {value!r} now" in line
    assert "from the start of epoch 4" in line


def test_another_number_of_processes_is_a_change_and_an_epoch_start_stays():
    config = Config()
    checkpoint = checkpoint_of(config, world_size=2, epoch=5, index=0)
    assert batching_changes(checkpoint, config, 1) == ["processes: 2 there, 1 now"]
    assert resume_position(checkpoint, config, 1)[0] == {"epoch": 5, "index": 0}


def test_a_checkpoint_without_the_key_counts_it_unchanged():
    config = Config()
    checkpoint = checkpoint_of(config)
    del checkpoint["config"]["train"]["max_tokens"], checkpoint["world_size"]
    changed = dataclasses.replace(config, train=dataclasses.replace(config.train, max_tokens=99))
    assert batching_changes(checkpoint, changed, 4) == []


def test_bpe_dropout_samples_drawn_again_move_the_run_to_the_next_epoch():
    config = Config()
    checkpoint = checkpoint_of(config)
    checkpoint["data_position"]["segmentation"] = "aaaa"
    now = {"epoch": 1, "index": 0, "segmentation": "bbbb"}
    assert batching_changes(checkpoint, config, 1, {**now, "segmentation": "aaaa"}) == []
    assert batching_changes(checkpoint, config, 1) == []  # not known now: unchanged
    phrase = "BPE-dropout samples: aaaa there, bbbb now (drawn again: a new cache entry)"
    assert batching_changes(checkpoint, config, 1, now) == [phrase]
    position, line = resume_position(checkpoint, config, 1, now)
    assert position == {"epoch": 4, "index": 0} and phrase in line


def test_resuming_with_a_larger_max_tokens_goes_on_from_the_next_epoch(
    tmp_path, tiny_run, shared_data
):
    from transformer.checkpoint import read_checkpoint
    from transformer.train.trainer import Trainer

    small = tmp_path / "small"
    for lang in ("en", "de"):
        lines = (shared_data / "multi30k" / f"train.{lang}").read_text().splitlines()[:2000]
        Path(f"{small}.{lang}").write_text("\n".join(lines) + "\n")
    run_dir = tmp_path / "run"
    common = [*tiny_run.fast, f"data.train={small}", f"train.output_dir={run_dir}"]
    Trainer(tiny_run.load([*common, "train.max_tokens=128", "train.max_steps=40"])).train()
    saved = read_checkpoint(run_dir / "checkpoint_last.pt")["data_position"]
    lines = []
    config = tiny_run.load([*common, "train.max_tokens=4096", "train.max_steps=42"])
    trainer = Trainer(config, log=lines.append)
    assert saved["index"] > len(trainer.batches.batches)  # the old position is past the epoch
    assert trainer.batches.state_dict() == {"epoch": saved["epoch"] + 1, "index": 0}
    (line,) = [x for x in lines if "cut differently" in x]
    assert line.startswith(f"{run_dir / 'checkpoint_last.pt'}: the batches are cut differently")
    assert "train.max_tokens: 128 there, 4096 now" in line
    assert trainer.train().step == 42


def test_resuming_after_the_cache_was_drawn_again_goes_on_from_the_next_epoch(
    tmp_path, tiny_run, shared_data
):
    """The issue a hostile user found: BPE-dropout's cache deleted between a run and its
    resume is drawn again with other samples, so the saved position names other batches
    (and may lie past the epoch's end); the run says so and goes on from the next epoch."""
    import shutil

    from transformer.train.trainer import Trainer

    run_dir = tmp_path / "run"
    common = [*tiny_run.fast, f"train.output_dir={run_dir}", "data.bpe_dropout=0.1"]
    Trainer(tiny_run.load([*common, "train.max_steps=6"])).train()
    shutil.rmtree(run_dir / "cache")
    lines = []
    trainer = Trainer(tiny_run.load([*common, "train.max_steps=8"]), log=lines.append)
    assert trainer.batches.state_dict()["epoch"] == 2
    (line,) = [x for x in lines if "cut differently" in x]
    assert "BPE-dropout samples: " in line and "drawn again: a new cache entry" in line
    assert trainer.train().step == 8
