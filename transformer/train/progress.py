"""What a training job shows while it runs: the progress bar, training records, wall time.

Rank 0 shows a tqdm bar over the updates with the latest loss, learning rate, target tokens
per second and MFU, and writes one `{"type": "train"}` record to metrics.jsonl every
`train.log_interval_steps` updates (the sums of `metrics_log.TrainWindow` since the previous
one). MFU, the model FLOPs per second over the devices' peak (`transformer.train.flops`), is
shown only where a peak is known: a GPU in the table, or `train.peak_tflops`.
The clock counts training wall time summed over the runs of a resumed job, which
`train.max_minutes` limits and checkpoints store.

Progress is shown against whichever limit ends the run first: with `train.max_minutes`, the
bar's total becomes the step the time limit is projected to stop at (from this run's rate), so
its ETA is the time that is left. Written to a file or a pipe instead of a terminal, there is
no bar (no carriage-return update per step): one line per training record instead.
"""

from __future__ import annotations

import sys
import time

from tqdm import tqdm

from transformer.train.metrics_log import MetricsLog, TrainWindow
from transformer.train.update import UpdateResult


class TrainProgress:
    """The bar, the open training-record window and the clock of one `Trainer.train` call.

    Args:
        metrics: The run's metrics log (written on rank 0 only).
        max_steps: The last update (`train.max_steps`), the bar's total.
        step: Updates done before this run (a resumed job's step).
        elapsed_seconds: Training wall time of the earlier runs of a resumed job.
        is_main: Whether this is rank 0 (only rank 0 shows the bar and writes records).
        peak_flops: Peak FLOP/s of all processes' devices together, or None (no MFU).
        max_minutes: `train.max_minutes` (None: no time limit).
        interactive: Show a bar (True) or one line per record (False); default: whether
            stderr is a terminal.
    """

    def __init__(
        self,
        metrics: MetricsLog,
        max_steps: int,
        step: int,
        elapsed_seconds: float,
        is_main: bool,
        peak_flops: float | None = None,
        max_minutes: float | None = None,
        interactive: bool | None = None,
    ) -> None:
        self.metrics, self.is_main, self.peak_flops = metrics, is_main, peak_flops
        self.started, self.elapsed_before = time.monotonic(), elapsed_seconds
        self.max_steps, self.first_step = max_steps, step
        self.limit_seconds = None if max_minutes is None else max_minutes * 60
        self.interactive = sys.stderr.isatty() if interactive is None else interactive
        self.window = TrainWindow()
        self.bar = tqdm(
            total=max_steps,
            initial=step,
            disable=not (is_main and self.interactive),
            desc="train",
            dynamic_ncols=True,
        )

    def elapsed(self) -> float:
        """Training wall time in seconds, including earlier runs of a resumed job."""
        return self.elapsed_before + time.monotonic() - self.started

    def forecast(self, step: int) -> tuple[int, float, str]:
        """Where the run will end: (last step, seconds left, the limit that ends it).

        The time limit's last step is projected from this run's updates per second; before
        the first update only `max_steps` is known.
        """
        left = self.max_steps - step
        done, seconds = step - self.first_step, time.monotonic() - self.started
        if done <= 0 or seconds <= 0:
            return self.max_steps, float("nan"), "max_steps"
        rate = done / seconds
        steps_left = (float("inf"), left / rate, "max_steps")
        if self.limit_seconds is not None:
            time_left = max(self.limit_seconds - self.elapsed(), 0.0)
            if time_left < steps_left[1]:
                return min(self.max_steps, step + int(time_left * rate)), time_left, "max_minutes"
        return self.max_steps, steps_left[1], "max_steps"

    def add(self, result: UpdateResult, flops: float = 0.0) -> None:
        """Count one applied update (advances the bar).

        Args:
            result: The update's sums over all processes.
            flops: Its model FLOPs over all processes (`flops.batch_flops`).
        """
        self.bar.update(1)
        if self.interactive and self.limit_seconds is not None:  # the ETA from the first step
            self.bar.total = max(self.forecast(self.bar.n)[0], self.bar.n)
        self.window.add(result.loss_sum, result.nll_sum, result.tokens, flops)

    def write(
        self, step: int, lr: float, epoch: int, skipped_updates: int, grad_norm: float | None
    ) -> None:
        """Write the metrics.jsonl record of the updates since the last one; start a new window.

        Args:
            step: The update just applied.
            lr: Its learning rate.
            epoch: The current pass over the training data.
            skipped_updates: Updates skipped so far for a non-finite loss.
            grad_norm: The update's gradient norm before clipping, if measured.
        """
        record = self.window.record(step, lr, self.peak_flops)
        record["epoch"] = epoch
        record["skipped_updates"] = skipped_updates
        record["elapsed_minutes"] = self.elapsed() / 60
        if grad_norm is not None:
            record["grad_norm"] = grad_norm
        if self.is_main:
            self.metrics.write(record)
            postfix = {
                "loss": f"{record['loss']:.3f}",
                "lr": f"{lr:.2e}",
                "tok_s": f"{record['tokens_per_second']:.0f}",
            }
            if "mfu" in record:
                postfix["mfu"] = f"{100 * record['mfu']:.1f}%"
            last, seconds_left, limit = self.forecast(step)
            if self.interactive:
                self.bar.total = max(last, step)  # the bar's ETA: the limit that ends the run
                self.bar.set_postfix(postfix, refresh=False)
            else:
                fields = " ".join(f"{key} {value}" for key, value in postfix.items())
                tqdm.write(
                    f"step {step}/{last} ({limit}) {fields} elapsed {_clock(self.elapsed())} "
                    f"left {_clock(seconds_left)}"
                )
        self.window.reset()

    def close(self) -> None:
        """Close the bar."""
        self.bar.close()


def _clock(seconds: float) -> str:
    """H:MM:SS ("?" before it can be known)."""
    if seconds != seconds:  # NaN
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"
