"""What a training checkpoint holds beyond the weights, and how a run is put back together.

`training_checkpoint` assembles the self-contained checkpoint dict (format in checkpoint.py):
weights, model config, full config, SentencePiece model(s), optimizer, LR schedule, gradient
scaler, step and progress counters, the batch iterator's position, and every process's RNG
states. `restore_training_checkpoint` loads it back into freshly built components, so that a
resumed run continues exactly as if it had not stopped.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import numpy as np
import torch

from transformer.checkpoint import FORMAT_VERSION, strip_wrapper_prefixes, unwrap_model
from transformer.config import Config, config_to_dict


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


def training_checkpoint(
    *,
    model: torch.nn.Module,
    config: Config,
    tokenizer,
    optimizer: torch.optim.Optimizer,
    schedule,
    scaler: torch.amp.GradScaler,
    batches,
    rng: list[dict],
    state: TrainState,
    precision: str,
) -> dict:
    """The checkpoint dict of a training run.

    Args:
        model: The model (wrappers are removed, so keys carry no prefixes).
        config: The full resolved config (its `model` section rebuilds the model).
        tokenizer: The run's `Tokenizer` (its model bytes are embedded).
        optimizer, schedule, scaler, batches: Components with `state_dict()`.
        rng: `capture_rng_state()` of every process, indexed by rank.
        state: Progress counters.
        precision: The resolved precision (informational).
    """
    return {
        "format_version": FORMAT_VERSION,
        "model": unwrap_model(model).state_dict(),
        "model_config": dataclasses.asdict(config.model),
        "config": config_to_dict(config),
        "spm_model": tokenizer.src_model_bytes,
        "tgt_spm_model": None if tokenizer.shared else tokenizer.tgt_model_bytes,
        "step": state.step,
        "optimizer": optimizer.state_dict(),
        "lr_scheduler": schedule.state_dict(),
        "scaler": scaler.state_dict(),
        "data_position": batches.state_dict(),
        "rng": rng,
        "world_size": len(rng),
        "precision": precision,
        "train_state": dataclasses.asdict(state),
    }


def restore_training_checkpoint(
    checkpoint: dict,
    path: str | Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    schedule,
    scaler: torch.amp.GradScaler,
    batches,
) -> TrainState:
    """Load a `training_checkpoint` dict into freshly built components (RNG states excepted).

    Returns:
        The saved `TrainState`.

    Raises:
        ValueError: when the weights do not fit `model` (another architecture), naming `path`.
    """
    try:
        unwrap_model(model).load_state_dict(strip_wrapper_prefixes(checkpoint["model"]))
    except RuntimeError as error:
        raise ValueError(
            f"{path} does not fit the configured model (use --no-resume or another "
            f"train.output_dir): {error}"
        ) from error
    optimizer.load_state_dict(checkpoint["optimizer"])
    schedule.load_state_dict(checkpoint["lr_scheduler"])
    if scaler.is_enabled() and checkpoint["scaler"]:
        scaler.load_state_dict(checkpoint["scaler"])
    batches.load_state_dict(checkpoint["data_position"])
    return TrainState(**checkpoint["train_state"])
