"""One optimizer update with gradient accumulation over micro-batches and processes.

The loss of an update is the label-smoothed loss summed over every real target token of all
its micro-batches on all processes, divided by their number (section 5.4 normalisation): each
micro-batch's summed loss is scaled by world_size / total_tokens before its backward pass
(DistributedDataParallel then averages gradients over the world_size processes), so one batch
and the same batch split into micro-batches or over processes give the same gradient.
Gradients are synchronised across processes only after the last micro-batch (`no_sync`).

The host waits for the device once per update, at one `.tolist()`: the token count, the loss
sums, the stop/save requests, the gradient norm and the fp16 overflow flag travel in one
tensor, and no micro-batch reads anything back. So the forward and backward passes of all
micro-batches, the unscaling and the clipping are queued on the GPU without a pause; only the
decision to step (finite loss, no overflow) needs the host.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
from collections.abc import Callable

import torch

from transformer.train.distributed import DistributedContext, all_reduce_sum
from transformer.train.ema import ExponentialMovingAverage
from transformer.train.loss import label_smoothed_cross_entropy
from transformer.train.optim import LRSchedule
from transformer.train.precision import autocast

# The model's only buffer is the sinusoid table of section 3.5 (non-persistent, the same
# constant on every process): DDP need not broadcast it before every forward pass. Newer torch
# calls the option `forward_sync_buffers` and deprecates `broadcast_buffers`.
_DDP = torch.nn.parallel.DistributedDataParallel
_BUFFER_SYNC = "forward_sync_buffers"
if _BUFFER_SYNC not in inspect.signature(_DDP).parameters:
    _BUFFER_SYNC = "broadcast_buffers"


@dataclasses.dataclass
class UpdateResult:
    """One update's sums over all micro-batches and processes.

    Attributes:
        loss_sum, nll_sum: Summed label-smoothed loss and NLL over real target tokens.
        tokens: Real target tokens of the update.
        flags: Stop/save requests, OR-ed over processes.
        applied: False when no optimizer step was taken (non-finite loss, fp16 overflow).
        grad_norm: Gradient norm before clipping (only with `clip_norm` and a finite loss).
    """

    loss_sum: float
    nll_sum: float
    tokens: int
    flags: list[bool]
    applied: bool = False
    grad_norm: float | None = None

    @property
    def finite(self) -> bool:
        return math.isfinite(self.loss_sum)


class UpdateStep:
    """Callable that performs one update; built once per training run.

    In a distributed job the forward pass goes through a DistributedDataParallel wrapper of
    `model` (gradients are averaged over processes); with `compile`, through torch.compile.

    Args:
        model: The un-wrapped model (its parameters are clipped and stepped).
        optimizer, schedule, scaler: Adam, its LR schedule, the (possibly disabled) scaler.
        context: This process's place in the job.
        precision: Resolved precision ("fp32", "bf16", "fp16").
        label_smoothing: epsilon_ls.
        pad_id: Padding id of the target.
        clip_norm: Gradient-norm clipping threshold, or None.
        compile: Run the forward pass through torch.compile (dynamic batch shapes).
        ema: The moving average of the weights, updated after each applied step, or None.
    """

    def __init__(
        self,
        *,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        schedule: LRSchedule,
        scaler: torch.amp.GradScaler,
        context: DistributedContext,
        precision: str,
        label_smoothing: float,
        pad_id: int,
        clip_norm: float | None,
        compile: bool = False,
        ema: ExponentialMovingAverage | None = None,
    ) -> None:
        self.model, self.ddp, self.ema = model, None, ema
        forward_model: torch.nn.Module = model
        if context.enabled:
            device_ids = [context.device] if context.device.type == "cuda" else None
            self.ddp = _DDP(model, device_ids=device_ids, **{_BUFFER_SYNC: False})
            forward_model = self.ddp
        # Batches change shape all the time: compile once with the batch size and both lengths
        # dynamic. (By default torch.compile first specialises on the first batch's shape and
        # recompiles at each change of another size: two or three compilations of a minute
        # each on a GPU, where one serves every batch.)
        self.forward_model = (
            torch.compile(forward_model, dynamic=True) if compile else forward_model
        )
        self.optimizer, self.schedule, self.scaler = optimizer, schedule, scaler
        self.context, self.device, self.precision = context, context.device, precision
        self.label_smoothing, self.pad_id, self.clip_norm = label_smoothing, pad_id, clip_norm

    def __call__(
        self,
        micro_batches: list,
        flags: list[bool] | Callable[[], list[bool]],
        elapsed: Callable[[], float] | None = None,
    ) -> UpdateResult:
        """Forward/backward `micro_batches`, then one optimizer step if the loss is finite.

        Args:
            micro_batches: This process's batches of the update (see `BatchIterator`).
            flags: This process's requests (stop, save), OR-ed over processes in the result;
                a callable is asked after the backward passes, so that a request made while
                they ran (Ctrl-C) is part of this update.
            elapsed: This process's training wall time in seconds, asked with `flags`; its
                mean over processes (the same on each) goes to the schedule's `step()`, so
                that a time-budget cooldown sets the same rate on every process.

        Returns:
            The update's `UpdateResult`; `applied` tells whether the optimizer stepped (and
            the schedule advanced).

        The host waits for the device once, for the result (module doc); with fp16, a
        non-fused optimizer makes `GradScaler.step` wait once more (the trainer's fused Adam
        does not), and so does an update with a non-finite loss (rare).
        """
        # Every tensor that is reduced lives on the training device (the rule of distributed.py):
        # NCCL reduces GPU tensors only. The host waits once, at `.tolist()` (module doc).
        local_tokens = sum(batch.n_tgt_tokens for batch in micro_batches)
        total = all_reduce_sum(self._on_device([local_tokens]), self.context)
        scale = self.context.world_size / total[0]  # DDP averages gradients over processes
        self.model.train()
        sums = torch.zeros(2, dtype=torch.float64, device=self.device)
        for i, batch in enumerate(micro_batches):
            batch = batch.to(self.device, non_blocking=True)
            sync = self.ddp is None or i == len(micro_batches) - 1
            with contextlib.nullcontext() if sync else self.ddp.no_sync():
                with autocast(self.precision, self.device):
                    logits = self.forward_model(batch.src, batch.tgt_in)
                out = label_smoothed_cross_entropy(
                    logits, batch.tgt_out, self.label_smoothing, self.pad_id
                )
                self.scaler.scale(out.loss * scale.to(out.loss.dtype)).backward()
            sums += torch.stack([out.loss.detach(), out.nll_loss]).double()
        flags = flags() if callable(flags) else flags
        clock = [] if elapsed is None else [elapsed()]
        requests = self._on_device([float(f) for f in flags] + clock)
        stats = all_reduce_sum(torch.cat([sums, requests]), self.context)
        # Not reduced: after DDP's averaging every process holds the same gradients.
        checks = self._unscale_and_clip()
        values = torch.cat([total, stats, checks]).tolist()  # the update's one host sync
        tokens, loss_sum, nll_sum, *flag_sums, grad_norm, overflow = values
        seconds = flag_sums.pop() / self.context.world_size if clock else None
        result = UpdateResult(loss_sum, nll_sum, int(tokens), [f > 0 for f in flag_sums])
        if not result.finite:
            self.optimizer.zero_grad(set_to_none=True)
            if self.scaler.is_enabled():  # forget the unscaling, keep the scale (a rare wait)
                self.scaler.update(self.scaler.get_scale())
            return result
        if self.clip_norm is not None:
            result.grad_norm = grad_norm
        # fp16: the scaler skips a step whose gradients overflowed and lowers its scale.
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        result.applied = overflow == 0
        if result.applied:
            self.schedule.step(seconds)
            if self.ema is not None:
                self.ema.update()
        return result

    def _unscale_and_clip(self) -> torch.Tensor:
        """Unscale (fp16) and clip (`clip_norm`) the gradients, without waiting for the device.

        Returns:
            (2,) float64 on the training device: the gradient norm before clipping (0 without
            `clip_norm`) and the fp16 overflow flag (> 0 when a gradient is inf or NaN, so
            that `scaler.step` skips the step; 0 without fp16).
        """
        self.scaler.unscale_(self.optimizer)  # a no-op unless fp16
        zero = torch.zeros((), dtype=torch.float64, device=self.device)
        norm, overflow = zero, zero
        if self.clip_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
        if self.scaler.is_enabled():
            # What `GradScaler.step` reads to skip the step: the inf/NaN flags `unscale_`
            # found, one per device. Its public `get_scale()` would wait for the device.
            found = self.scaler._found_inf_per_device(self.optimizer).values()
            overflow = sum(flag.to(self.device).double() for flag in found)
        return torch.stack([norm.to(self.device, torch.float64), overflow])

    def _on_device(self, values: list[float]) -> torch.Tensor:
        """`values` as a float64 tensor on the training device. The copy to a GPU does not wait
        for the GPU's queued work (a host-to-device copy from pageable memory is staged)."""
        return torch.tensor(values, dtype=torch.float64, device="cpu").to(
            self.device, non_blocking=True
        )
