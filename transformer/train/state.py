"""A training run's state beyond the weights: progress counters and every random generator.

`TrainState` is saved in every checkpoint as plain values; `capture_rng_state` and
`restore_rng_state` take and put back the Python, NumPy, torch and CUDA generators, so that a
resumed run draws the same dropout masks and batch orders as one that never stopped.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import torch


@dataclasses.dataclass
class TrainState:
    """Progress counters, saved in every checkpoint (plain values only).

    Attributes:
        step: Applied updates so far.
        best_metric: Best validation value of `train.best_metric` so far (None before any).
        best_step: Step of `best_metric`.
        bad_validations: Validations in a row without improvement (early stopping).
        skipped_updates: Updates skipped for a non-finite loss (`skip_nonfinite`).
        elapsed_seconds: Wall time spent training, summed over resumed runs.
        stop_reason: Why training last stopped ("max_steps", "max_minutes", ...).
    """

    step: int = 0
    best_metric: float | None = None
    best_step: int | None = None
    bad_validations: int = 0
    skipped_updates: int = 0
    elapsed_seconds: float = 0.0
    stop_reason: str | None = None


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and every GPU) random generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def capture_rng_state() -> dict:
    """Every random state training touches, as tensors and plain values.

    Returns:
        {"python": tuple, "numpy": dict, "torch": ByteTensor, "cuda": list[ByteTensor]}.
    """
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def restore_rng_state(state: dict) -> None:
    """Inverse of `capture_rng_state`."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    numpy_state = state["numpy"]
    np.random.set_state(
        (
            numpy_state["kind"],
            numpy_state["keys"].numpy().astype(np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"].cpu())
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
