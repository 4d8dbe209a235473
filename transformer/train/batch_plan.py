"""How one update is split over micro-batches and processes (`train.tokens_per_update`).

`TrainConfig.batch_plan` (transformer/train/config.py) makes the plan; the trainer batches by it
and prints `describe()` at the start of a run. The paper trains on batches of about 25000 source
and 25000 target tokens (section 5.1); the plan keeps that figure for any number of processes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchPlan:
    """How one update is split: micro-batches of `max_tokens` x `update_freq` x processes.

    Attributes:
        max_tokens: Tokens per side per micro-batch per process, padding included.
        update_freq: Micro-batches accumulated per process per update.
        world_size: Processes.
        target: `train.tokens_per_update`, or None when `update_freq` was given.
    """

    max_tokens: int
    update_freq: int
    world_size: int
    target: int | None

    @property
    def tokens_per_update(self) -> int:
        """Tokens per side of one update over all processes, padding included (at most)."""
        return self.max_tokens * self.update_freq * self.world_size

    @property
    def off_target(self) -> float:
        """Relative distance of `tokens_per_update` from the target (0 without one)."""
        if self.target is None:
            return 0.0
        return abs(self.tokens_per_update - self.target) / self.target

    def describe(self) -> str:
        """One line: the effective figure, how it is made, and a warning when > 10% off."""
        line = (
            f"tokens per update: up to {self.tokens_per_update:,} per side, padding included "
            f"(max_tokens {self.max_tokens} x update_freq {self.update_freq} x "
            f"{self.world_size} process(es))"
        )
        if self.target is not None:
            line += f"; target train.tokens_per_update {self.target:,}"
            if self.off_target > 0.1:
                line += (
                    f". warning: {100 * self.off_target:.0f}% off the target (a micro-batch must "
                    "hold the longest pair); the learning-rate schedule assumes the target"
                )
        return line
