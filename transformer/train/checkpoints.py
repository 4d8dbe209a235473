"""The checkpoints of a training job: written from rank 0, restored into every process.

`TrainingCheckpoints` writes `training_checkpoint`s (`train/training_checkpoint.py`: everything
a run needs to continue) into the run directory, and starts a job's processes fresh or from
checkpoint_last.pt, so that a resumed run goes on as if it had not stopped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from transformer.checkpoint import read_checkpoint, save_checkpoint
from transformer.config import Config
from transformer.data.batching import BatchIterator
from transformer.data.tokenizer import Tokenizer
from transformer.train.batch_changes import resume_position
from transformer.train.distributed import DistributedContext, all_gather_object
from transformer.train.ema import ExponentialMovingAverage, ema_changes
from transformer.train.metrics_log import MetricsLog
from transformer.train.optim import LRSchedule, changed_settings
from transformer.train.prefetch import Prefetcher
from transformer.train.run_directory import RunDirectory
from transformer.train.state import (
    TrainState,
    capture_rng_state,
    restore_rng_state,
    seed_everything,
)
from transformer.train.training_checkpoint import (
    restore_training_checkpoint,
    training_checkpoint,
)


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
        ema: The moving average of the weights (`train.ema_decay`), or None.
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
    ema: ExponentialMovingAverage | None = None

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
            ema=self.ema,
        )

    def save(self, state: TrainState, numbered: bool, best: bool) -> None:
        """Write checkpoint_last.pt (and a numbered and/or the best one, and checkpoint_ema.pt
        with `ema`), or with `best` alone checkpoint_best.pt only; from rank 0."""
        checkpoint = self.state(state)
        if checkpoint is None:
            return
        if not numbered and best:
            self.run_dir.save_best(checkpoint)
            return
        if self.ema is not None:  # with checkpoint_last.pt, just before it
            save_checkpoint(self.ema.checkpoint(checkpoint), self.run_dir.ema_path)
        keep = self.config.train.keep_last
        self.run_dir.save(checkpoint, state.step, keep, numbered=numbered, best=best)

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
            aside = self.run_dir.set_aside_previous_run()  # no mixing of two runs' files
            if aside is not None:
                log(
                    f"starting fresh in {self.run_dir.path}: the earlier run's checkpoints "
                    f"and metrics moved to {aside}"
                )
            metrics.truncate_after(0)
        # Identical initial weights, different dropout masks: ranks > 0 re-seed; rank 0 keeps
        # the stream of a single process, so that torchrun with one process matches it.
        if self.context.rank > 0:
            torch.manual_seed(self.config.train.seed + self.context.rank)
        return TrainState()

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
            ema=self.ema,
        )
        for note in ema_changes(checkpoint.get("ema"), self.ema, self.run_dir.ema_path):
            log(f"{path}: {note}")
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
