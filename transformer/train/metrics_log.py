"""The run directory's metrics log: `metrics.jsonl`, one JSON object per line.

Training writes one object per logged step (`{"type": "train", "step", "loss", "lr",
"tokens_per_second", ...}`, and "mfu" where the devices' peak is known) and one per
validation (`{"type": "valid", "step", "loss", "ppl", "bleu", "elapsed_minutes", ...}`).
Only rank 0 writes. On resume, lines for steps after the checkpoint (written by a run that
died before saving again) are dropped, so that each step appears once and the file matches an
uninterrupted run. A mirror (`train.tensorboard`: `tensorboard_log.TensorBoardLog`) receives
every record written, from this one place.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from transformer.atomic import atomic_write_text


class MetricsLog:
    """Append-only JSONL writer; as a context manager, closes its mirror on exit.

    Args:
        path: The `metrics.jsonl` file (created on first write).
        mirror: Also receives every record written: an object with `write(record)`, `flush()`
            and `close()` (a `TensorBoardLog`), or None; may be set later (`self.mirror`).
    """

    def __init__(self, path: str | Path, mirror=None) -> None:
        self.path = Path(path)
        self.mirror = mirror

    def write(self, record: dict) -> None:
        """Append one object as a line and flush it to the OS; then pass it to the mirror."""
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(_line(record))
            file.flush()
        if self.mirror is not None:
            self.mirror.write(record)

    def flush(self) -> None:
        """Flush the mirror (the lines of metrics.jsonl are flushed as they are written)."""
        if self.mirror is not None:
            self.mirror.flush()

    def close(self) -> None:
        """Close the mirror and stop mirroring (metrics.jsonl is opened per write, never held)."""
        if self.mirror is not None:
            self.mirror.close()
            self.mirror = None

    def __enter__(self) -> MetricsLog:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def read(self) -> list[dict]:
        """All complete records (a line cut off by a crash is ignored)."""
        if not self.path.is_file():
            return []
        records = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return records

    def summary(self) -> dict:
        """What a run's report shows: minutes, updates, mean tokens/s and the validation curve.

        Returns:
            `train_minutes` (the last `elapsed_minutes`), `steps` (the last step),
            `tokens_per_second` (the mean over the training records, rounded; None when no
            training record was logged yet, as in a run shorter than `log_interval_steps`) and
            `learning_curve` (each validation's step, minutes, loss and BLEU when logged).

        Raises:
            ValueError: when the log has no records.
        """
        records = self.read()
        if not records:
            raise ValueError(f"{self.path} holds no records")
        train = [r for r in records if r.get("type", "train") == "train"]
        keys = ("step", "elapsed_minutes", "loss", "bleu")
        curve = [{k: r[k] for k in keys if k in r} for r in records if r.get("type") == "valid"]
        speeds = [r["tokens_per_second"] for r in train if "tokens_per_second" in r]
        return {
            "train_minutes": round(max(r.get("elapsed_minutes", 0.0) for r in records), 2),
            "steps": max(r.get("step", 0) for r in records),
            "tokens_per_second": round(sum(speeds) / len(speeds)) if speeds else None,
            "learning_curve": curve,
        }

    def truncate_after(self, step: int) -> None:
        """Drop records of steps after `step` (rewrites the file atomically)."""
        if not self.path.is_file():
            return
        kept = [r for r in self.read() if r.get("step", 0) <= step]
        atomic_write_text(self.path, "".join(_line(record) for record in kept))


def _line(record: dict) -> str:
    """One record as a line of the log."""
    return json.dumps(record, sort_keys=True) + "\n"


class TrainWindow:
    """Sums over the updates since the last training log record.

    The logged `loss` is the label-smoothed loss per real target token over the window's
    updates (token-weighted, natural log), `ppl` = exp(nll per token),
    `tokens_per_second` counts real target tokens of all processes per second of wall time,
    and `mfu` (when a peak is known) is the model FLOPs of all processes per second over their
    peak FLOP/s (`transformer.train.flops`).
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start a new window now."""
        self.loss = self.nll = 0.0
        self.tokens = 0
        self.flops = 0.0
        self.start = time.monotonic()

    def add(self, loss_sum: float, nll_sum: float, tokens: int, flops: float = 0.0) -> None:
        """Add one update's summed losses, real target tokens and model FLOPs."""
        self.loss += loss_sum
        self.nll += nll_sum
        self.tokens += tokens
        self.flops += flops

    def record(self, step: int, lr: float, peak_flops: float | None = None) -> dict:
        """The `{"type": "train", ...}` record of the window (then `reset()` it).

        Args:
            step: The update just applied.
            lr: Its learning rate.
            peak_flops: Peak FLOP/s of all processes' devices together; None: no `mfu`.

        Returns:
            The record.
        """
        tokens = max(self.tokens, 1)
        seconds = max(time.monotonic() - self.start, 1e-9)
        record = {
            "type": "train",
            "step": step,
            "loss": self.loss / tokens,
            "nll_loss": self.nll / tokens,
            "ppl": math.exp(min(self.nll / tokens, 700.0)),
            "lr": lr,
            "tokens_per_second": self.tokens / seconds,
            "target_tokens": self.tokens,
        }
        if peak_flops is not None:
            record["mfu"] = self.flops / seconds / peak_flops
        return record
