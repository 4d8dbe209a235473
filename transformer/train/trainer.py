"""The training loop of section 5: token-based batches, Adam with warm-up, label smoothing.

`Trainer(config).train()` runs one job in the run directory `train.output_dir`. One update:

1. take `update_freq` micro-batches of at most `max_tokens` tokens per side (per process);
2. count the real target tokens of the whole update (all micro-batches, all processes);
3. forward/backward each micro-batch under the configured autocast, scaling its summed
   label-smoothed loss by world_size / that count (DDP averages gradients over processes),
   so the gradient is that of the per-token loss of the whole update however it was split;
4. optional gradient clipping, then the optimizer step with the schedule's rate of this update.

A resumed run restores weights, optimizer, schedule, scaler, step, batch position and every
RNG state (`train/checkpoints.py`, `train/state.py`): it goes on as if it had never stopped.
"""

from __future__ import annotations

import dataclasses
import time

import torch
from tqdm import tqdm

from transformer.attention_backends import avoid_cudnn_attention
from transformer.config import Config, config_to_dict
from transformer.cpu.dropout import swap_dropout_layers
from transformer.cpu.malloc import keep_freed_memory
from transformer.cpu.onednn import swap_linear_layers, use_onednn
from transformer.cpu.primitive_cache import keep_compiled_products
from transformer.data.batching import BatchIterator
from transformer.data.prepare import PreparedData
from transformer.device import resolve_device
from transformer.model.config import ModelConfig
from transformer.model.transformer import Transformer
from transformer.train.checkpoints import TrainingCheckpoints
from transformer.train.deterministic import use_deterministic_kernels
from transformer.train.distributed import DistributedContext, process_group_backend
from transformer.train.ema import ExponentialMovingAverage
from transformer.train.flops import batch_flops, device_peak_flops
from transformer.train.interrupt import StopSignals
from transformer.train.metrics_log import MetricsLog
from transformer.train.nonfinite import NonFiniteLossError, handle_nonfinite  # noqa: F401 (re-exported)
from transformer.train.optim import build_lr_schedule, build_optimizer
from transformer.train.precision import allow_tf32, grad_scaler, resolve_precision
from transformer.train.prefetch import Prefetcher
from transformer.train.progress import TrainProgress
from transformer.train.run_data import prepare_run_data
from transformer.train.run_directory import RunDirectory
from transformer.train.state import TrainState, seed_everything
from transformer.train.tensorboard_log import TensorBoardLog
from transformer.train.update import UpdateStep
from transformer.train.validation import Validator


def model_config_for(config: ModelConfig, tokenizer) -> ModelConfig:
    """The model config with the vocabulary sizes of the trained SentencePiece model(s)."""
    if tokenizer.shared:
        return dataclasses.replace(config, vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=None)
    return dataclasses.replace(
        config,
        vocab_size=tokenizer.src_vocab_size,
        tgt_vocab_size=tokenizer.tgt_vocab_size,
        share_embeddings=False,
    )


class Trainer:
    """One training job: data, model, optimizer, and the loop that updates them.

    Args:
        config: The whole config; the model's vocabulary sizes are replaced by those of the
            SentencePiece model(s) trained (or found) in the run directory.
        context: This process's place in a torchrun job (default: one process on the device
            `train.device` names).
        resume: Continue from the run directory's `checkpoint_last.pt` when it exists.
        log: Receives one-line messages (rank 0 only).
        prepared: The job's data, when already prepared by `prepare_run_data` (as
            `transformer-train` does before the process group starts); default: prepared here.

    Raises:
        ValueError: invalid options, or a checkpoint that does not fit the model.
    """

    def __init__(
        self,
        config: Config,
        context: DistributedContext | None = None,
        resume: bool = True,
        log=tqdm.write,
        prepared: PreparedData | None = None,
    ) -> None:
        train = config.train
        self.context = context or DistributedContext(
            device=resolve_device(train.device, what="train.device")
        )
        self.device, world, rank = self.context.device, self.context.world_size, self.context.rank
        self.log = log if self.context.is_main else (lambda message: None)
        if train.num_threads:
            torch.set_num_threads(train.num_threads)
        torch.set_flush_denormal(train.flush_denormal)
        if self.device.type == "cpu":  # process-wide, before the first product (transformer/cpu)
            keep_compiled_products()  # oneDNN's code for every batch shape (cpu/primitive_cache.py)
            if train.keep_freed_memory:
                keep_freed_memory()  # glibc's malloc reuses freed tensors' pages (cpu/malloc.py)
        self.precision = resolve_precision(train.precision, self.device)
        allow_tf32(self.device)  # float32 products on CUDA's tensor cores (train/precision.py)
        avoid_cudnn_attention(self.device)  # no per-shape plans (attention_backends.py)
        if train.deterministic:  # before the first matrix product (cuBLAS's workspace)
            use_deterministic_kernels(self.device)
        onednn = use_onednn(train.linear_kernel, self.device, self.precision, train.compile)
        self.plan = train.batch_plan(world, longest=config.data.max_len + 1)  # + bos/eos
        self.update_freq = self.plan.update_freq
        self.run_dir = RunDirectory(train.output_dir)
        # Rank 0 prepares the data; the others wait for its files (train/run_data.py).
        self.prepared = prepared or prepare_run_data(config, self.context, self.log)
        self.tokenizer = self.prepared.tokenizer
        self.config = dataclasses.replace(
            config, model=model_config_for(config.model, self.tokenizer)
        )
        seed_everything(train.seed)
        self.model = Transformer(self.config.model).to(self.device)
        if onednn:  # float32 CPU products by oneDNN (transformer.cpu.onednn), same parameters
            swap_linear_layers(self.model)
        if self.device.type == "cpu" and not train.compile:  # faster masks (cpu/dropout.py)
            swap_dropout_layers(self.model)
        self.optimizer = build_optimizer(self.model, train)
        self.schedule = build_lr_schedule(self.optimizer, train, self.config.model.d_model)
        self.scaler = grad_scaler(self.precision, self.device)
        model = self.config.model
        ids = dict(pad_id=model.pad_id, bos_id=model.bos_id, eos_id=model.eos_id)
        shard = dict(seed=train.seed, rank=rank, world_size=world)  # this process's batches
        batches = BatchIterator(self.prepared.train, self.plan.max_tokens, **shard, **ids)
        if self.update_freq > len(batches):  # an update would hold the epoch, all in memory
            raise ValueError(
                f"one update needs {self.update_freq} micro-batches per process, more than the "
                f"{len(batches)} of an epoch; lower train.tokens_per_update / update_freq"
            )
        self.batches = Prefetcher(batches, self.update_freq, self.device)  # train/prefetch.py
        self.metrics = MetricsLog(self.run_dir.metrics_path)
        self.validator = None
        if self.prepared.valid is not None and train.validate_interval_steps > 0:
            self.validator = Validator(
                self.prepared, self.config, self.context, self.precision, self.metrics, self.log
            )
        self.ema = None  # the moving average of the weights (train/ema.py), if configured
        if train.ema_decay is not None:
            self.ema = ExponentialMovingAverage(self.model, train.ema_decay)
        components = (self.model, self.optimizer, self.schedule, self.scaler, self.batches)
        self.checkpoints = TrainingCheckpoints(
            self.run_dir, self.context, self.config, self.tokenizer, self.precision, *components,
            ema=self.ema,
        )  # fmt: skip
        self.resumes = resume  # what the line after an interruption advises
        self.state = self.checkpoints.start(resume, self.metrics, self.log)
        self.update = UpdateStep(
            model=self.model,
            optimizer=self.optimizer,
            schedule=self.schedule,
            scaler=self.scaler,
            context=self.context,
            precision=self.precision,
            label_smoothing=train.label_smoothing,
            pad_id=self.config.model.pad_id,
            clip_norm=train.clip_norm,
            compile=train.compile,
            ema=self.ema,
        )

    def _save(self, numbered: bool, best: bool) -> None:
        """Write checkpoint_last.pt (and numbered / best ones); collective."""
        self.state.elapsed_seconds = self.progress.elapsed()
        self.checkpoints.save(self.state, numbered, best)
        self.metrics.flush()  # the TensorBoard events up to this checkpoint

    def _validate(self) -> tuple[bool, bool]:
        """Validate and update the best/early-stopping counters. Returns (is_best, stop_early)."""
        metrics = self.validator.validate(self.model)
        return self.validator.record(metrics, self.state, self.progress.elapsed() / 60)

    def _describe(self) -> None:
        """Print what will run: device, precision, model size, effective batch."""
        world = self.context.world_size
        params = sum(p.numel() for p in self.model.parameters())
        group = f" (process group: {process_group_backend()})" if self.context.enabled else ""
        self.log(
            f"run directory {self.run_dir.path}; device {self.device} x {world} process(es)"
            f"{group}; precision {self.precision}; {params:,} parameters"
        )
        self.log(self.plan.describe())

    def train(self) -> TrainState:
        """Train until max_steps, max_minutes, max_epochs or early stopping; checkpoint at the end.

        Returns:
            The final `TrainState` (with `stop_reason`).

        Raises:
            NonFiniteLossError: on a NaN/Inf loss unless `train.skip_nonfinite` (the last good
                checkpoint is left as it is).
            ImportError: `train.tensorboard` without tensorboard, before the first update
                (`transformer-train` checks it before preparing the data).
        """
        if self.config.train.tensorboard and self.context.is_main:  # train/tensorboard_log.py
            self.metrics.mirror = TensorBoardLog(self.run_dir.tensorboard_path, self.state.step + 1)
        # Reading thread and mirror close on errors too; the first Ctrl-C / SIGTERM stops cleanly.
        announce = self.context.is_main  # one "stopping after this update" for all processes
        with self.metrics, self.batches, StopSignals(announce) as self.signals:
            return self._train(self.signals)

    def _train(self, signals: StopSignals) -> TrainState:
        train, state = self.config.train, self.state
        if self.context.is_main:
            self.run_dir.write_config(config_to_dict(self.config))
            self._describe()
        world, is_main = self.context.world_size, self.context.is_main
        peak = device_peak_flops(self.device, self.precision, train.peak_tflops, devices=world)
        self.progress = progress = TrainProgress(
            self.metrics,
            train.max_steps,
            state.step,
            state.elapsed_seconds,
            is_main,
            peak,
            max_minutes=train.max_minutes,
        )
        last_save, saved_step, validated_step = time.monotonic(), state.step, state.step
        consecutive_skips, stream, stop = 0, iter(self.batches), None
        if train.max_minutes is not None and state.elapsed_seconds >= train.max_minutes * 60:
            stop = "max_minutes"  # resumed with the time budget spent: no further update
        while stop is None:
            if state.step >= train.max_steps:
                stop = "max_steps"
                break
            epoch = self.batches.state_dict()["epoch"]  # of the next update
            if train.max_epochs is not None and epoch > train.max_epochs:
                stop = "max_epochs"
                break
            micro_batches = next(stream)  # update_freq batches
            flops = batch_flops(self.config.model, micro_batches) * world  # others': about the same
            lr = self.schedule.lr
            time_up = train.max_minutes is not None and progress.elapsed() >= train.max_minutes * 60
            save_due = train.save_interval_minutes is not None and (
                time.monotonic() - last_save >= train.save_interval_minutes * 60
            )
            # The stop request is read after the backward passes: a Ctrl-C during them stops
            # after this update.
            requests = lambda up=time_up, due=save_due: [up, due, signals.requested]  # noqa: E731
            result = self.update(micro_batches, requests, progress.elapsed)
            if result.applied:
                state.step += 1
            time_up, save_due, interrupted = result.flags  # OR-ed over processes
            # A stop asked for during the last update is no interruption: the run is complete.
            done = state.step >= train.max_steps
            stop = "interrupted" if interrupted and not done else None
            consecutive_skips = 0 if result.finite else consecutive_skips + 1
            if not result.finite and not interrupted:
                last = self.run_dir.last_path
                handle_nonfinite(result, consecutive_skips, state, train, last, self.log)
            if not result.applied:
                continue
            progress.add(result, flops)
            if state.step % train.log_interval_steps == 0 or state.step == train.max_steps:
                epoch = self.batches.state_dict()["epoch"]
                progress.write(state.step, lr, epoch, state.skipped_updates, result.grad_norm)
            is_best = stop_early = False
            if self.validator is not None and state.step % train.validate_interval_steps == 0:
                is_best, stop_early = self._validate()
                validated_step = state.step
            if stop is None and (time_up or stop_early or state.step >= train.max_steps):
                stop = "max_minutes" if time_up else "early_stopping" if stop_early else "max_steps"
                if self.validator is not None and validated_step != state.step:
                    is_best, _ = self._validate()
            periodic = (
                bool(train.save_interval_steps) and state.step % train.save_interval_steps == 0
            )
            if periodic or save_due or stop is not None:
                # An interruption writes checkpoint_last.pt only: the numbered ones keep the
                # configured interval (what averaging the last N relies on).
                self._save(numbered=periodic or save_due or stop != "interrupted", best=is_best)
                saved_step, last_save = state.step, time.monotonic()
            elif is_best:
                self._save(numbered=False, best=True)
        progress.close()
        if saved_step != state.step:
            self._save(numbered=stop != "interrupted", best=False)
        state.stop_reason = stop
        if stop == "interrupted":
            cause = signals.received.name if signals.requested else "a signal to another process"
            again = "the same command" if self.resumes else "it without --no-resume / --fresh"
            self.log(
                f"{cause}: stopped after step {state.step}, {self.run_dir.last_path} "
                f"written; rerun {again} to resume"
            )
            return state
        best = ""
        if state.best_metric is not None:
            best = f"; best {train.best_metric} {state.best_metric:.4g} at step {state.best_step}"
        self.log(f"stopped at step {state.step} ({stop}){best}")
        return state
