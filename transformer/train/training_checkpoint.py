"""What a training checkpoint holds, and how it is loaded back into a fresh run.

`training_checkpoint` assembles the self-contained checkpoint dict (format in checkpoint.py):
weights, model config, full config, SentencePiece model(s), optimizer, LR schedule, gradient
scaler, step and progress counters, the batch iterator's position, every process's RNG states,
and the moving average of the weights when the run keeps one. `restore_training_checkpoint`
loads it into fresh components, so that a resumed run goes on as if it had not stopped
(`train/checkpoints.py` does both for a job's processes).
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import torch

from transformer.checkpoint import (
    FORMAT_VERSION,
    check_tied_weights,
    strip_wrapper_prefixes,
    unwrap_model,
)
from transformer.config import Config, config_to_dict
from transformer.train.ema import ExponentialMovingAverage
from transformer.train.optim import load_optimizer_state
from transformer.train.state import TrainState


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
    ema: ExponentialMovingAverage | None = None,
) -> dict:
    """The checkpoint dict of a training run.

    Args:
        model: The model (wrappers are removed, so keys carry no prefixes).
        config: The full resolved config (its `model` section rebuilds the model).
        tokenizer: The run's `Tokenizer` (its model bytes are embedded).
        optimizer, schedule, scaler, batches: Components with `state_dict()`.
        rng: `capture_rng_state(device)` of every process, indexed by rank.
        state: Progress counters.
        precision: The resolved precision (informational).
        ema: The moving average of the weights, if the run keeps one (`train.ema_decay`).
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
        "ema": None if ema is None else ema.state_dict(),
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
    ema: ExponentialMovingAverage | None = None,
) -> TrainState:
    """Load a `training_checkpoint` into fresh components (not RNG states; Adam's settings stay).

    A configured `ema` goes on from the saved average, or starts from the loaded weights when
    the checkpoint has none.

    Returns:
        The saved `TrainState`.

    Raises:
        ValueError: when the weights do not fit `model` (another architecture), copies of a
            tied matrix differ (`check_tied_weights`), the file holds no training state (an
            averaged checkpoint), or an entry is malformed (a hand-edited file), naming `path`.
    """
    needed = ("optimizer", "lr_scheduler", "data_position", "train_state")
    missing = [k for k in needed if k not in checkpoint]
    if missing:
        raise ValueError(
            f"{path} cannot be resumed: it has no {', '.join(missing)} (an averaged or "
            "weights-only checkpoint?); use --no-resume or another train.output_dir"
        )
    weights = strip_wrapper_prefixes(checkpoint["model"])
    check_tied_weights(weights, unwrap_model(model), path)
    try:
        unwrap_model(model).load_state_dict(weights)
    except RuntimeError as error:
        raise ValueError(
            f"{path} does not fit the configured model ({_difference(checkpoint, model)}); "
            "use --no-resume or another train.output_dir"
        ) from error
    with _entry(path, "optimizer"):
        load_optimizer_state(optimizer, checkpoint["optimizer"])
    with _entry(path, "lr_scheduler"):
        schedule.load_state_dict(checkpoint["lr_scheduler"])
    if scaler.is_enabled() and checkpoint["scaler"]:
        with _entry(path, "scaler"):
            scaler.load_state_dict(checkpoint["scaler"])
    with _entry(path, "data_position"):
        batches.load_state_dict(checkpoint["data_position"])
    if ema is not None and checkpoint.get("ema") is not None:
        with _entry(path, "ema"):
            ema.load_state_dict(checkpoint["ema"], path)
    elif ema is not None:
        ema.restart()
    with _entry(path, "train_state"):
        return TrainState(**checkpoint["train_state"])


@contextlib.contextmanager
def _entry(path: str | Path, key: str):
    """Turn the error of loading a malformed entry (a hand-edited file) into one line."""
    try:
        yield
    except (KeyError, TypeError, AttributeError, IndexError) as error:
        raise ValueError(
            f"{path}: its {key!r} entry does not load ({type(error).__name__}: {error}); "
            "use --no-resume or another train.output_dir"
        ) from error


def _difference(checkpoint: dict, model: torch.nn.Module) -> str:
    """What differs from `model`, briefly: saved model.* keys, else the first tensor's shape."""
    saved = (checkpoint.get("config") or {}).get("model") or {}
    config = getattr(unwrap_model(model), "config", None)
    if saved and config is not None:
        ours = dataclasses.asdict(config)
        plain = lambda value: list(value) if isinstance(value, list | tuple) else value  # noqa: E731
        keys = [k for k in ours if k in saved and plain(saved[k]) != plain(ours[k])]
        if keys:
            return ", ".join(f"model.{k}: {saved[k]!r} there, {ours[k]!r} now" for k in keys)
    own = unwrap_model(model).state_dict()
    for name, tensor in strip_wrapper_prefixes(checkpoint["model"]).items():
        if name in own and tuple(own[name].shape) != tuple(tensor.shape):
            return f"{name} is {tuple(tensor.shape)} there, {tuple(own[name].shape)} here"
    return "other parameter names"
