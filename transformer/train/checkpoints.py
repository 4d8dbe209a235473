"""A training checkpoint: everything a run needs to continue, and how a run is put back together.

`training_checkpoint` assembles the self-contained checkpoint dict (format in checkpoint.py):
weights, model config, full config, SentencePiece model(s), optimizer, LR schedule, gradient
scaler, step and progress counters, the batch iterator's position, every process's RNG states.
`restore_training_checkpoint` loads it into fresh components (a resumed run goes on as if it
had not stopped); `TrainingCheckpoints` does both for a job's processes, fresh or resumed.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import torch

from transformer.checkpoint import (
    FORMAT_VERSION,
    check_tied_weights,
    read_checkpoint,
    strip_wrapper_prefixes,
    unwrap_model,
)
from transformer.config import Config, config_to_dict
from transformer.data.batching import BatchIterator
from transformer.data.tokenizer import Tokenizer
from transformer.train.batch_changes import resume_position
from transformer.train.distributed import DistributedContext, all_gather_object
from transformer.train.metrics_log import MetricsLog
from transformer.train.optim import LRSchedule, changed_settings, load_optimizer_state
from transformer.train.prefetch import Prefetcher
from transformer.train.run_directory import RunDirectory
from transformer.train.state import (
    TrainState,
    capture_rng_state,
    restore_rng_state,
    seed_everything,
)


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
        rng: `capture_rng_state(device)` of every process, indexed by rank.
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
    """Load a `training_checkpoint` into fresh components (not RNG states; Adam's settings stay).

    Returns:
        The saved `TrainState`.

    Raises:
        ValueError: when the weights do not fit `model` (another architecture), copies of a
            tied matrix differ (`check_tied_weights`), or the file holds no training state (an
            averaged checkpoint), naming `path`.
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
    load_optimizer_state(optimizer, checkpoint["optimizer"])
    schedule.load_state_dict(checkpoint["lr_scheduler"])
    if scaler.is_enabled() and checkpoint["scaler"]:
        scaler.load_state_dict(checkpoint["scaler"])
    batches.load_state_dict(checkpoint["data_position"])
    return TrainState(**checkpoint["train_state"])


@dataclasses.dataclass
class TrainingCheckpoints:
    """Writes and restores the checkpoints of one training job; every method is collective.

    Attributes:
        run_dir: The run directory.
        context: This process's place in the job.
        config: The full resolved config.
        tokenizer: The run's tokenizer.
        precision: The resolved precision.
        model, optimizer, schedule, scaler, batches: The components a checkpoint restores;
            the data position is that of the updates `batches` handed out, not of its read-ahead.
    """

    run_dir: RunDirectory
    context: DistributedContext
    config: Config
    tokenizer: Tokenizer
    precision: str
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    schedule: LRSchedule
    scaler: torch.amp.GradScaler
    batches: Prefetcher | BatchIterator

    def state(self, state: TrainState) -> dict | None:
        """The full checkpoint dict on rank 0 (None elsewhere)."""
        rng = all_gather_object(capture_rng_state(self.context.device), self.context)
        if not self.context.is_main:
            return None
        return training_checkpoint(
            model=self.model,
            config=self.config,
            tokenizer=self.tokenizer,
            optimizer=self.optimizer,
            schedule=self.schedule,
            scaler=self.scaler,
            batches=self.batches,
            rng=rng,
            state=state,
            precision=self.precision,
        )

    def save(self, state: TrainState, numbered: bool, best: bool) -> None:
        """Write checkpoint_last.pt (and a numbered and/or the best one) from rank 0."""
        checkpoint = self.state(state)
        if checkpoint is None:
            return
        if numbered or not best:
            keep = self.config.train.keep_last
            self.run_dir.save(checkpoint, state.step, keep, numbered=numbered, best=best)
        else:
            self.run_dir.save_best(checkpoint)

    def start(self, resume: bool, metrics: MetricsLog, log: Callable[[str], None]) -> TrainState:
        """The counters to start from: checkpoint_last.pt's with `resume` (see `resume`), else
        fresh ones. Drops the metrics.jsonl records of later steps (rank 0).

        Args:
            resume: Continue from checkpoint_last.pt when it exists.
            metrics: The run's metrics log.
            log: Receives one-line messages.

        Raises:
            ValueError: when the checkpoint does not fit the model, naming the file.
        """
        last = self.run_dir.last_path
        if resume and last.is_file():
            state = self.resume(log)
            if self.context.is_main:
                metrics.truncate_after(state.step)
            log(f"resumed from {last} at step {state.step}")
            return state
        if self.context.is_main:
            self._set_aside_previous_run(log)
            metrics.truncate_after(0)
        # Identical initial weights, different dropout masks: ranks > 0 re-seed; rank 0 keeps
        # the stream of a single process, so that torchrun with one process matches it.
        if self.context.rank > 0:
            torch.manual_seed(self.config.train.seed + self.context.rank)
        return TrainState()

    def _set_aside_previous_run(self, log: Callable[[str], None]) -> None:
        """Move an earlier run's checkpoints, metrics.jsonl and tensorboard/ to previous-<time>/.

        A fresh start must not leave them beside the new ones: `keep_last` pruning and
        `transformer-average --last N` would mix the two runs. Nothing is deleted.
        """
        old = sorted(self.run_dir.path.glob("checkpoint_*.pt"))
        old += [p for p in (self.run_dir.metrics_path, self.run_dir.tensorboard_path) if p.exists()]
        if not old:
            return
        aside = self.run_dir.path / time.strftime("previous-%Y%m%d-%H%M%S", time.gmtime())
        aside.mkdir(exist_ok=True)
        for path in old:
            path.rename(aside / path.name)
        log(
            f"starting fresh in {self.run_dir.path}: the earlier run's checkpoints and metrics "
            f"moved to {aside}"
        )

    def resume(self, log: Callable[[str], None]) -> TrainState:
        """Restore every component and this process's RNG states from checkpoint_last.pt.

        Args:
            log: Receives a warning when the job has another number of processes than the
                one that wrote the checkpoint (RNG states are re-seeded), when the batches are
                cut differently (train/batch_changes.py), and per changed Adam setting.

        Returns:
            The saved progress counters.

        Raises:
            ValueError: when the checkpoint does not fit the model or was trained with another
                SentencePiece model than the run directory's, naming the file.
        """
        path = self.run_dir.last_path
        # To the CPU: load_state_dict moves weights and moments on; RNG states must stay there.
        checkpoint, world = read_checkpoint(path, map_location="cpu"), self.context.world_size
        saved = (checkpoint.get("spm_model"), checkpoint.get("tgt_spm_model"))
        tokenizer = self.tokenizer
        ours = (tokenizer.src_model_bytes, None if tokenizer.shared else tokenizer.tgt_model_bytes)
        if saved != ours:
            raise ValueError(
                f"{path} was trained with another SentencePiece model than the one in "
                f"{self.run_dir.path} (its token ids would mean other pieces); put the run's "
                "model back, or start over with --no-resume or another train.output_dir"
            )
        if "data_position" in checkpoint:  # (else restore_training_checkpoint says it is missing)
            now = self.batches.state_dict()  # with this run's BPE-dropout samples, if any
            checkpoint["data_position"], why = resume_position(checkpoint, self.config, world, now)
            if why:  # the position moved to the next epoch's start
                log(f"{path}: {why}")
        state = restore_training_checkpoint(
            checkpoint,
            path,
            model=self.model,
            optimizer=self.optimizer,
            schedule=self.schedule,
            scaler=self.scaler,
            batches=self.batches,
        )
        for change in changed_settings(self.optimizer, checkpoint["optimizer"]):
            log(f"{path}: {change} (the configured value applies from here on)")
        rng = checkpoint["rng"]
        if len(rng) == world:
            restore_rng_state(rng[self.context.rank], self.context.device)
        else:
            log(
                f"{path} was written by {len(rng)} process(es), now {world}: random states "
                "are re-seeded, so the run will not repeat bit for bit"
            )
            seed_everything(self.config.train.seed + state.step + self.context.rank)
        return state


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
