"""Tests for transformer/train/state.py: progress counters and the random generators' states.

References: the generators' own seeding functions (`random.seed`, `np.random.seed`,
`torch.manual_seed`) for `seed_everything`, and the draws made before a capture for
`restore_rng_state`.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import torch

from transformer.checkpoint import read_checkpoint, save_checkpoint
from transformer.train.state import (
    TrainState,
    capture_rng_state,
    restore_rng_state,
    seed_everything,
)


def _draws() -> tuple:
    return random.random(), np.random.rand(), np.random.randn(), torch.rand(3)


def _same(a: tuple, b: tuple) -> bool:
    return a[:3] == b[:3] and torch.equal(a[3], b[3])


def test_seed_everything_seeds_python_numpy_and_torch():
    seed_everything(7)
    ours = _draws()
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    assert _same(ours, _draws())
    seed_everything(8)
    assert not _same(ours, _draws())


def test_a_seed_beyond_numpys_range_is_folded_into_it():
    seed_everything(2**32 + 5)
    ours = _draws()
    random.seed(2**32 + 5)
    np.random.seed(5)
    torch.manual_seed(2**32 + 5)
    assert _same(ours, _draws())


def test_rng_state_round_trip_through_a_weights_only_checkpoint(tmp_path):
    path = tmp_path / "rng.pt"
    np.random.randn()  # numpy caches the second of each pair of Gaussians: capture that too
    checkpoint = {"format_version": 1, "model": {}, "model_config": {}}
    save_checkpoint({**checkpoint, "rng": capture_rng_state()}, path)
    state = read_checkpoint(path)["rng"]
    before = _draws()
    restore_rng_state(state)
    after = _draws()
    assert _same(before, after)


def test_train_state_is_plain_values_and_starts_at_zero():
    state = TrainState()
    assert (state.step, state.skipped_updates, state.bad_validations) == (0, 0, 0)
    assert state.best_metric is None and state.stop_reason is None
    values = dataclasses.asdict(TrainState(step=3, best_metric=1.5, stop_reason="max_steps"))
    assert all(isinstance(v, int | float | str | type(None)) for v in values.values())
    assert TrainState(**values) == TrainState(step=3, best_metric=1.5, stop_reason="max_steps")
