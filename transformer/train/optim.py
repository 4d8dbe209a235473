"""The optimizer and learning-rate schedule of section 5.3 of the paper.

Adam with beta1 = 0.9, beta2 = 0.98, eps = 1e-9, and the learning rate

    lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

with warmup_steps = 4000, where `step` is counted from 1 at the first update. Options: a
constant factor `lr_scale` on that formula, and the fairseq-style "inverse_sqrt" schedule,
which rises linearly from 0 to `peak_lr` over `warmup_steps` and then decays as step^-0.5.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import torch

from transformer.train.config import TrainConfig


def noam_rate(step: int, d_model: int, warmup_steps: int, scale: float = 1.0) -> float:
    """The paper's rate for update `step` (equation 3, section 5.3).

    Args:
        step: Update number, 1 for the first update.
        d_model: Model width.
        warmup_steps: Updates of linear warm-up (4000 in the paper).
        scale: Constant factor (1.0 in the paper).

    Returns:
        scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).

    Raises:
        ValueError: if `step` or `warmup_steps` is below 1.
    """
    if step < 1 or warmup_steps < 1:
        raise ValueError(f"step ({step}) and warmup_steps ({warmup_steps}) must be at least 1")
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def inverse_sqrt_rate(step: int, peak_lr: float, warmup_steps: int) -> float:
    """fairseq's `inverse_sqrt` schedule: linear warm-up to `peak_lr`, then ~ step^-0.5.

    Args:
        step: Update number, 1 for the first update.
        peak_lr: Rate reached at update `warmup_steps`.
        warmup_steps: Updates of linear warm-up (from 0).

    Returns:
        peak_lr * step / warmup_steps during warm-up, else peak_lr * sqrt(warmup_steps / step).

    Raises:
        ValueError: if `step` or `warmup_steps` is below 1.
    """
    if step < 1 or warmup_steps < 1:
        raise ValueError(f"step ({step}) and warmup_steps ({warmup_steps}) must be at least 1")
    if step <= warmup_steps:
        return peak_lr * step / warmup_steps
    return peak_lr * math.sqrt(warmup_steps / step)


class LRSchedule:
    """Sets the learning rate of every parameter group from a rate function of the update number.

    After construction the optimizer holds the rate of update 1; call `step()` after each
    applied `optimizer.step()` to move to the next update's rate. Skipped updates (non-finite
    loss, fp16 overflow) do not call `step()`, so the schedule counts applied updates only.

    Args:
        optimizer: The optimizer whose `lr` is set.
        rate: Maps an update number (1-based) to a learning rate.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, rate: Callable[[int], float]) -> None:
        self.optimizer = optimizer
        self.rate = rate
        self.num_updates = 0
        self._apply()

    @property
    def lr(self) -> float:
        """The rate the next update will use (update number `num_updates + 1`)."""
        return self.rate(self.num_updates + 1)

    def step(self) -> None:
        """Record one applied update and set the rate for the next."""
        self.num_updates += 1
        self._apply()

    def _apply(self) -> None:
        lr = self.lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def state_dict(self) -> dict:
        """Plain values only: {"num_updates": int}."""
        return {"num_updates": self.num_updates}

    def load_state_dict(self, state: dict) -> None:
        """Restore the update counter (and the optimizer's current rate)."""
        self.num_updates = int(state["num_updates"])
        self._apply()


def build_optimizer(model: torch.nn.Module, train: TrainConfig) -> torch.optim.Adam:
    """Adam with the paper's betas (0.9, 0.98) and eps 1e-9 (section 5.3), or the configured ones.

    Tied parameters (shared embeddings) appear once in `model.parameters()`, so they get one
    Adam state. `weight_decay` (0 in the paper) uses Adam's L2 form. Parameters on CPU or CUDA
    use PyTorch's fused Adam (`fused=True`: the same update in one kernel per parameter group,
    faster than the default multi-tensor loop, see BENCHMARKS.md; Hugging Face's Trainer also
    defaults to it with torch >= 2.8).

    Returns:
        The optimizer; its rate is set by `build_lr_schedule`.
    """
    params = list(model.parameters())
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params)
    return torch.optim.Adam(
        params,
        lr=0.0,
        betas=tuple(train.adam_betas),
        eps=train.adam_eps,
        weight_decay=train.weight_decay,
        fused=fused or None,
    )


def build_lr_schedule(
    optimizer: torch.optim.Optimizer, train: TrainConfig, d_model: int
) -> LRSchedule:
    """The configured schedule: "noam" (the paper's, times `lr_scale`) or "inverse_sqrt"."""
    if train.lr_schedule == "noam":
        rate = partial(
            noam_rate, d_model=d_model, warmup_steps=train.warmup_steps, scale=train.lr_scale
        )
    else:  # "inverse_sqrt"; TrainConfig checked the name and that peak_lr is set
        rate = partial(inverse_sqrt_rate, peak_lr=train.peak_lr, warmup_steps=train.warmup_steps)
    return LRSchedule(optimizer, rate)
