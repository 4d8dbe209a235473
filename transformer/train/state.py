"""A training run's state beyond the weights: progress counters and every random generator.

`TrainState` is saved in every checkpoint as plain values; `capture_rng_state` and
`restore_rng_state` take and put back the Python, NumPy, torch and CUDA generators (that of the
process's own GPU), so that a resumed run draws the same dropout masks and batch orders as one
that never stopped.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import torch

CPU = torch.device("cpu")


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


def capture_rng_state(device: torch.device = CPU) -> dict:
    """Every random state this process's training touches, as tensors and plain values.

    Args:
        device: The training device. On a GPU its own generator is saved, and only that one:
            under torchrun each process draws from its GPU's generator alone, and a process
            may see one GPU only (`torch.cuda.get_rng_state_all()` would save the others').

    Returns:
        {"python": tuple, "numpy": dict, "torch": ByteTensor, "cuda": ByteTensor of `device`'s
        generator, or None when training on another device}.
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
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
    }


def restore_rng_state(state: dict, device: torch.device = CPU) -> None:
    """Inverse of `capture_rng_state`; tensors may come on any device (they are copied to the
    CPU, where generator states live).

    Args:
        state: A `capture_rng_state` dict. Its "cuda" entry may also be the list of every
            visible GPU's state that earlier versions saved: the entry of `device`'s index is
            used (none when the list is shorter).
        device: The training device; a GPU gets its own generator back.
    """
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    numpy_state = state["numpy"]
    np.random.set_state(
        (
            numpy_state["kind"],
            numpy_state["keys"].cpu().numpy().astype(np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"].cpu())
    cuda = state["cuda"]
    if device.type != "cuda" or cuda is None or not torch.cuda.is_available():
        return
    if isinstance(cuda, list | tuple):  # every visible GPU's state (older checkpoints)
        index = torch.cuda.current_device() if device.index is None else device.index
        if index >= len(cuda):
            return
        cuda = cuda[index]
    torch.cuda.set_rng_state(cuda.cpu(), device)
