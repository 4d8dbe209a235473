"""Tests for transformer/train/tensorboard_log.py: metrics.jsonl's records as TensorBoard events.

Reference: TensorBoard's own reader (`EventAccumulator`) of the event files that tiny real
training runs (configs/tiny.yaml on a slice of Multi30k, CPU, seconds) write, against
`json.loads` of the same runs' metrics.jsonl lines, each number rounded to float32 as
TensorBoard stores it. Resuming after a crash must show each step once, with the values of
the run that kept it, as metrics.jsonl does.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from transformer.cli.train import main
from transformer.train.tensorboard_log import TENSORBOARD_INSTALL_HINT, record_scalars
from transformer.train.trainer import Trainer


def events(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar TensorBoard shows for `directory`: tag -> [(step, value)], by its reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(directory), size_guidance={"scalars": 0})  # 0: keep all
    accumulator.Reload()
    tags = accumulator.Tags()["scalars"]
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in tags}


def expected_scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """What metrics.jsonl holds, as tag -> [(step, float32 value)]: every number but the step
    (booleans are not numbers here), tagged `<type>/<field>`."""
    expected = defaultdict(list)
    for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for field, value in record.items():
            if field == "step" or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            expected[f"{record['type']}/{field}"].append((record["step"], float(np.float32(value))))
    return dict(expected)


def test_record_scalars_are_the_numbers_but_the_step():
    record = {"type": "valid", "step": 7, "loss": 2.5, "bleu": 3, "best": True, "note": "x"}
    assert record_scalars(record) == [("valid/bleu", 3.0), ("valid/loss", 2.5)]


def test_the_events_hold_every_number_of_every_record(tmp_path, tiny_run):
    pytest.importorskip("tensorboard")
    run_dir = tmp_path / "run"
    overrides = ["train.log_interval_steps=1", "train.num_threads=1", "train.max_steps=4"]
    overrides += ["train.validate_interval_steps=2", "train.valid_bleu_sentences=4"]
    overrides += [f"train.output_dir={run_dir}", "train.tensorboard=true"]
    Trainer(tiny_run.load(overrides)).train()
    expected = expected_scalars(run_dir)
    assert {"train/loss", "train/lr", "train/tokens_per_second", "valid/loss", "valid/bleu"} <= set(
        expected
    )
    assert [step for step, _ in expected["valid/bleu"]] == [2, 4]
    assert events(run_dir / "tensorboard") == expected


def test_a_resumed_run_shows_each_step_once_as_metrics_jsonl_does(tmp_path, tiny_run):
    pytest.importorskip("tensorboard")
    run_dir = tmp_path / "run"
    overrides = [*tiny_run.fast, f"train.output_dir={run_dir}", "train.tensorboard=true"]
    overrides += ["train.max_steps=4", "train.save_interval_steps=2", "train.keep_last=5"]
    Trainer(tiny_run.load(overrides)).train()
    first = expected_scalars(run_dir)
    # A crash after step 4's records but before its checkpoint: the last checkpoint is step 2's.
    # (checkpoint_last.pt is a hard link to checkpoint_4.pt: unlink it, never write through it.)
    (run_dir / "checkpoint_last.pt").unlink()
    shutil.copy(run_dir / "checkpoint_2.pt", run_dir / "checkpoint_last.pt")
    assert Trainer(tiny_run.load(overrides)).train().step == 4
    assert len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) == 2
    expected = expected_scalars(run_dir)
    assert all([s for s, _ in points] == [1, 2, 3, 4] for points in expected.values())
    # Steps 3 and 4 were trained again: their speed differs from the first run's.
    assert expected["train/tokens_per_second"][2:] != first["train/tokens_per_second"][2:]
    assert events(run_dir / "tensorboard") == expected
    # Rerunning the finished run trains nothing and adds no (empty) event file (#17, new user).
    assert Trainer(tiny_run.load(overrides)).train().step == 4
    assert len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) == 2

    # A fresh start moves the earlier events aside with the earlier checkpoints and metrics.
    fresh = [*overrides, "train.max_steps=1"]
    Trainer(tiny_run.load(fresh), resume=False).train()
    (aside,) = run_dir.glob("previous-*")
    assert events(aside / "tensorboard") == expected
    assert events(run_dir / "tensorboard") == expected_scalars(run_dir)
    assert [s for s, _ in events(run_dir / "tensorboard")["train/loss"]] == [1]


def test_without_tensorboard_the_run_fails_before_any_work(tmp_path, tiny_run, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if not installed
    run_dir = tmp_path / "run"
    argv = ["--config", str(tiny_run.config_path), *tiny_run.fast, f"train.output_dir={run_dir}"]
    assert main([*argv, "train.tensorboard=true"]) == 1
    error = capsys.readouterr().err
    assert error == f"transformer-train: error: {TENSORBOARD_INSTALL_HINT}\n"
    assert "pip install tensorboard" in error
    assert not run_dir.exists()  # no data prepared, nothing written
    # Through the Python API: before the first update.
    trainer = Trainer(tiny_run.load([*argv[2:], "train.max_steps=1", "train.tensorboard=true"]))
    with pytest.raises(ImportError, match="pip install tensorboard"):
        trainer.train()
    assert not os.path.exists(run_dir / "metrics.jsonl")
    assert not (run_dir / "tensorboard").exists()
