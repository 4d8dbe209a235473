"""Tests for transformer/train/state.py: progress counters and the random generators' states.

References: the generators' own seeding functions (`random.seed`, `np.random.seed`,
`torch.manual_seed`) for `seed_everything`, and the draws made before a capture for
`restore_rng_state`.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
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


class _OnGpu:
    """A CUDA tensor as `restore_rng_state` meets it in a checkpoint read to the GPU: `.numpy()`
    raises as torch's does for a CUDA tensor, `.cpu()` gives the values back."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def cpu(self) -> torch.Tensor:
        return self.tensor

    def numpy(self):
        raise TypeError("can't convert cuda:0 device type tensor to numpy")


def test_rng_states_read_to_another_device_are_restored():
    state = capture_rng_state()
    state["numpy"]["keys"] = _OnGpu(state["numpy"]["keys"])
    state["torch"] = _OnGpu(state["torch"])
    before = _draws()
    restore_rng_state(state)
    assert _same(before, _draws())


CUDA0, CUDA1 = torch.device("cuda", 0), torch.device("cuda", 1)


@pytest.fixture
def fake_cuda(monkeypatch) -> list:
    """Two faked GPUs whose generator states are `[device index] * 4` bytes; returns the list of
    `set_rng_state` calls. The *_all functions (every visible GPU) must not be used."""
    calls = []

    def get_rng_state(device="cuda"):
        return torch.full((4,), torch.device(device).index, dtype=torch.uint8)

    def every_gpu(*args):
        raise AssertionError("only the process's own GPU's generator may be used")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state", get_rng_state)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, device: calls.append((s, device)))
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", every_gpu)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", every_gpu)
    return calls


def test_only_the_training_gpus_generator_is_saved_and_restored(fake_cuda):
    state = capture_rng_state(CUDA1)
    assert state["cuda"].tolist() == [1] * 4
    assert capture_rng_state(torch.device("cpu"))["cuda"] is None  # a GPU not trained on
    restore_rng_state(state, CUDA1)
    ((restored, device),) = fake_cuda
    assert restored.tolist() == [1] * 4 and device == CUDA1
    restore_rng_state(state, torch.device("cpu"))
    assert len(fake_cuda) == 1  # training on the CPU leaves the GPUs' generators alone


@pytest.mark.parametrize(
    "saved, device, expected",
    [(2, CUDA1, [1] * 4), (1, CUDA0, [0] * 4), (1, CUDA1, None), (0, CUDA0, None)],
    ids=["own-of-two", "own-of-one", "not-saved", "trained-on-cpu"],
)
def test_older_checkpoints_with_every_visible_gpus_state_still_resume(
    fake_cuda, saved, device, expected
):
    state = capture_rng_state()
    state["cuda"] = [torch.full((4,), i, dtype=torch.uint8) for i in range(saved)]
    restore_rng_state(state, device)
    assert [(s.tolist(), d) for s, d in fake_cuda] == (
        [] if expected is None else [(expected, device)]
    )


def test_train_state_is_plain_values_and_starts_at_zero():
    state = TrainState()
    assert (state.step, state.skipped_updates, state.bad_validations) == (0, 0, 0)
    assert state.best_metric is None and state.stop_reason is None
    values = dataclasses.asdict(TrainState(step=3, best_metric=1.5, stop_reason="max_steps"))
    assert all(isinstance(v, int | float | str | type(None)) for v in values.values())
    assert TrainState(**values) == TrainState(step=3, best_metric=1.5, stop_reason="max_steps")
