"""Tests for transformer/train/update.py with fp16 loss scaling (GradScaler), and the host reads
of one update (the micro-batches and constants of tests/train/test_update.py)."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tests.train.test_update import CPU, EPSILON, LR, MICRO_BATCHES, PAD
from transformer.train import update as update_module
from transformer.train.distributed import DistributedContext
from transformer.train.optim import LRSchedule
from transformer.train.precision import grad_scaler
from transformer.train.update import UpdateStep


def fp16_step(model, init_scale: float, clip_norm=None, optimizer=None):
    """An fp16 `UpdateStep` on the CPU (float32 weights) with a scaler starting at `init_scale`."""
    optimizer = optimizer or torch.optim.SGD(model.parameters(), lr=0.0)
    schedule = LRSchedule(optimizer, lambda step: LR)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    step = UpdateStep(
        model=model,
        optimizer=optimizer,
        schedule=schedule,
        scaler=scaler,
        context=DistributedContext(),
        precision="fp16",
        label_smoothing=EPSILON,
        pad_id=PAD,
        clip_norm=clip_norm,
    )
    return step, schedule, scaler


@pytest.mark.parametrize("clip_norm", [None, 1.0], ids=["no-clip", "clip"])
def test_an_fp16_overflow_skips_the_step_and_the_schedule_and_lowers_the_scale(
    make_model, clip_norm
):
    """GradScaler's documented behaviour: inf/NaN gradients skip `optimizer.step()` and halve
    the scale; otherwise the step is taken and the scale kept (it grows every 2000 steps)."""
    model = make_model(30, dropout=0.0)  # float32: autocast computes the products in fp16
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    step, schedule, scaler = fp16_step(model, 2.0**60, clip_norm)  # fp16 gradients overflow
    result = step(MICRO_BATCHES, [False, False])
    assert result.finite and not result.applied
    assert scaler.get_scale() == 2.0**59 and schedule.num_updates == 0
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), before[name]) and p.grad is None
    step, schedule, scaler = fp16_step(model, 2.0**8, clip_norm)
    result = step(MICRO_BATCHES, [False, False])
    assert result.applied and scaler.get_scale() == 2.0**8 and schedule.num_updates == 1
    assert (result.grad_norm is None) == (clip_norm is None)
    assert any(not torch.equal(p.detach(), before[n]) for n, p in model.named_parameters())


def test_an_fp16_update_with_a_non_finite_loss_keeps_the_scale(make_model, monkeypatch):
    model = make_model(30, dropout=0.0)
    step, schedule, scaler = fp16_step(model, 2.0**8, clip_norm=1.0)
    real = update_module.label_smoothed_cross_entropy

    def nan_loss(*args, **kwargs):
        out = real(*args, **kwargs)
        return out._replace(loss=out.loss * float("nan"))

    monkeypatch.setattr(update_module, "label_smoothed_cross_entropy", nan_loss)
    result = step(MICRO_BATCHES, [False, False])
    assert not result.finite and not result.applied and result.grad_norm is None
    assert scaler.get_scale() == 2.0**8 and scaler.state_dict()["_growth_tracker"] == 0
    monkeypatch.setattr(update_module, "label_smoothed_cross_entropy", real)
    assert step(MICRO_BATCHES, [False, False]).applied  # the scaler is ready for the next one
    assert schedule.num_updates == 1


class HostReads(TorchDispatchMode):
    """Counts the reads of a tensor's value by the host: `.item()`, `float()`, `bool()`..."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.ops.aten._local_scalar_dense.default
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_an_update_waits_for_the_device_once(make_model, monkeypatch, precision):
    """On a GPU every read of a device tensor by the host waits for the queued work. The one
    allowed read is the `.tolist()` of the update's results; no `.item()`, `float(tensor)` or
    `GradScaler.get_scale()` besides it, with clipping and fp16 loss scaling (the trainer's
    fused Adam: a non-fused optimizer makes `GradScaler.step` read its overflow flag)."""
    model = make_model(30, dropout=0.0)
    adam = torch.optim.Adam(model.parameters(), fused=True)
    step, _, _ = fp16_step(model, 2.0**8, clip_norm=1.0, optimizer=adam)
    if precision == "fp32":
        step.precision, step.scaler = "fp32", grad_scaler("fp32", CPU)
    tolist, calls = torch.Tensor.tolist, []
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: calls.append(1) or tolist(self))
    with HostReads() as reads:
        result = step(MICRO_BATCHES, [False, False])
    assert result.applied and result.grad_norm > 0
    assert len(calls) == 1 and reads.count == 0
