"""The optimizer and learning-rate schedule of section 5.3 of the paper.

Adam with beta1 = 0.9, beta2 = 0.98, eps = 1e-9, and the learning rate

    lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

with warmup_steps = 4000, where `step` is counted from 1 at the first update. Options: a
constant factor `lr_scale` on that formula, and the fairseq-style "inverse_sqrt" schedule,
which rises linearly from 0 to `peak_lr` over `warmup_steps` and then decays as step^-0.5,
and a linear cooldown to 0 over the last part of the run's budget (`Cooldown`), for runs that
a wall-time or step budget ends long before the rate has decayed.
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


class Cooldown:
    """Linear cooldown: the rate's factor falls from 1 to 0 over the last `fraction` of the budget.

    The "reciprocal square root with linear cooldown" of Zhai et al. (2022, "Scaling Vision
    Transformers", section 3.5), studied as a cooldown of any schedule by Hagele et al. (2024,
    "Scaling Laws and Compute-Optimal Training Beyond Fixed Training Durations"). Not in the
    paper, whose runs end on the step^-0.5 decay. The budget is the run's limit: `max_steps`
    updates, or `max_seconds` of training wall time, whichever is nearer to being spent (so a
    run stopped by its time limit ends with a rate near 0, as one stopped by max_steps does).

    Args:
        fraction: Part of the budget the cooldown takes, in (0, 1].
        max_steps: The run's last update (`train.max_steps`).
        max_seconds: The run's wall-time limit (`train.max_minutes` * 60), or None.
    """

    def __init__(self, fraction: float, max_steps: int, max_seconds: float | None) -> None:
        self.fraction, self.max_steps, self.max_seconds = fraction, max_steps, max_seconds

    def factor(self, updates: int, elapsed_seconds: float | None) -> float:
        """The rate's factor once `updates` updates are done and `elapsed_seconds` spent.

        Args:
            updates: Applied updates so far.
            elapsed_seconds: Training wall time so far (every process must pass the same
                value, so that every process sets the same rate); None: steps only.

        Returns:
            min(1, (1 - spent) / fraction), at least 0, where `spent` is the larger of
            updates / max_steps and elapsed_seconds / max_seconds.
        """
        spent = updates / self.max_steps
        if self.max_seconds is not None and elapsed_seconds is not None:
            spent = max(spent, elapsed_seconds / self.max_seconds)
        return min(1.0, max(0.0, (1.0 - spent) / self.fraction))


class LRSchedule:
    """Sets the learning rate of every parameter group from a rate function of the update number.

    After construction the optimizer holds the rate of update 1; call `step()` after each
    applied `optimizer.step()` to move to the next update's rate. Skipped updates (non-finite
    loss, fp16 overflow) do not call `step()`, so the schedule counts applied updates only.
    With a `cooldown`, the next rate is also multiplied by the cooldown's factor for the
    budget spent so far (updates, and the wall time `step()` is given).

    Args:
        optimizer: The optimizer whose `lr` is set.
        rate: Maps an update number (1-based) to a learning rate.
        cooldown: Linear cooldown over the end of the run's budget, or None (the paper).
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        rate: Callable[[int], float],
        cooldown: Cooldown | None = None,
    ) -> None:
        self.optimizer = optimizer
        self.rate = rate
        self.cooldown = cooldown
        self.num_updates = 0
        self.factor = 1.0  # the cooldown's factor for the next update
        self._apply()

    @property
    def lr(self) -> float:
        """The rate the next update will use (update number `num_updates + 1`)."""
        return self.rate(self.num_updates + 1) * self.factor

    def step(self, elapsed_seconds: float | None = None) -> None:
        """Record one applied update and set the rate for the next.

        Args:
            elapsed_seconds: Training wall time so far, the same on every process (read by a
                cooldown with a time budget only).
        """
        self.num_updates += 1
        if self.cooldown is not None:
            self.factor = self.cooldown.factor(self.num_updates, elapsed_seconds)
        self._apply()

    def _apply(self) -> None:
        lr = self.lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def state_dict(self) -> dict:
        """Plain values only: {"num_updates": int, "cooldown_factor": float}."""
        return {"num_updates": self.num_updates, "cooldown_factor": self.factor}

    def load_state_dict(self, state: dict) -> None:
        """Restore the update counter, the cooldown's factor (1 in checkpoints written before
        it existed, and when this schedule has no cooldown: a run resumed with the cooldown
        switched off gets its whole rate back) and the optimizer's current rate."""
        self.num_updates = int(state["num_updates"])
        self.factor = 1.0 if self.cooldown is None else float(state.get("cooldown_factor", 1.0))
        self._apply()


def build_optimizer(model: torch.nn.Module, train: TrainConfig) -> torch.optim.Adam:
    """Adam with the paper's betas (0.9, 0.98) and eps 1e-9 (section 5.3), or the configured ones.

    Tied parameters (shared embeddings) appear once in `model.parameters()`, so they get one
    Adam state. `weight_decay` (0 in the paper) uses Adam's L2 form, or AdamW's decoupled form
    with `decoupled_weight_decay` (PyTorch's Adam flag: the same update as
    `torch.optim.AdamW`). Parameters on CPU or CUDA
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
        decoupled_weight_decay=train.decoupled_weight_decay,
        fused=fused or None,
    )


def build_lr_schedule(
    optimizer: torch.optim.Optimizer, train: TrainConfig, d_model: int
) -> LRSchedule:
    """The configured schedule: "noam" (the paper's, times `lr_scale`) or "inverse_sqrt", with
    the linear cooldown of `train.cooldown_fraction` when it is above 0."""
    if train.lr_schedule == "noam":
        rate = partial(
            noam_rate, d_model=d_model, warmup_steps=train.warmup_steps, scale=train.lr_scale
        )
    else:  # "inverse_sqrt"; TrainConfig checked the name and that peak_lr is set
        rate = partial(inverse_sqrt_rate, peak_lr=train.peak_lr, warmup_steps=train.warmup_steps)
    cooldown = None
    if train.cooldown_fraction > 0:
        seconds = None if train.max_minutes is None else train.max_minutes * 60
        cooldown = Cooldown(train.cooldown_fraction, train.max_steps, seconds)
    return LRSchedule(optimizer, rate, cooldown)


# Adam's settings that the config sets, by the key of the config that sets them.
CONFIGURED_SETTINGS = {
    "betas": "train.adam_betas",
    "eps": "train.adam_eps",
    "weight_decay": "train.weight_decay",
    "decoupled_weight_decay": "train.decoupled_weight_decay",
}


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Load a saved optimizer state (Adam's moments and step counts) but keep this run's settings.

    torch's `Optimizer.load_state_dict` also brings back each parameter group's saved settings,
    so a run resumed with another `train.weight_decay` would go on with the old one unseen.
    As with the rate (which the schedule sets again from the config), the config's betas, eps
    and weight decay apply from the first resumed update on; fairseq's `--optimizer-overrides`
    does the same for the settings it is given. `changed_settings` says which ones changed.

    Args:
        optimizer: An optimizer built from this run's config (`build_optimizer`).
        state: `optimizer.state_dict()` of the saved run.
    """
    configured = [
        {key: value for key, value in group.items() if key not in ("params", "lr")}
        for group in optimizer.param_groups
    ]
    optimizer.load_state_dict(state)
    for group, ours in zip(optimizer.param_groups, configured, strict=True):
        group.update(ours)


def changed_settings(optimizer: torch.optim.Optimizer, state: dict) -> list[str]:
    """The configured Adam settings of `optimizer` that differ from those saved in `state`.

    Args:
        optimizer: An optimizer built from this run's config (`build_optimizer`).
        state: `optimizer.state_dict()` of the saved run.

    Returns:
        One line per setting, e.g. "train.weight_decay: 0.0 in the checkpoint, 0.1 now".
        A setting that the saved state lacks (written by an older torch) counts as torch's
        default: False for `decoupled_weight_decay`.
    """
    changes = {}
    for group, saved in zip(optimizer.param_groups, state["param_groups"], strict=True):
        for key, name in CONFIGURED_SETTINGS.items():
            before, now = _plain(saved.get(key, False)), _plain(group[key])
            if before != now:
                changes[name] = f"{name}: {before} in the checkpoint, {now} now"
    return list(changes.values())


def _plain(value):
    """A setting as the config writes it (betas are a tuple in Adam, a list in YAML)."""
    return list(value) if isinstance(value, list | tuple) else value
