"""The training loop of section 5: token-based batches, Adam with warm-up, label smoothing.

`Trainer(config).train()` runs one job in the run directory `train.output_dir`. One update:

1. take `update_freq` micro-batches of at most `max_tokens` tokens per side (per process);
2. count the real target tokens of the whole update (all micro-batches, all processes);
3. forward/backward each micro-batch under the configured autocast, scaling its summed
   label-smoothed loss by world_size / that count (DDP averages gradients over processes),
   so the gradient is that of the per-token loss of the whole update however it was split;
4. optional gradient clipping, then the optimizer step with the schedule's rate of this update.

A resumed run restores weights, optimizer, schedule, scaler, step, the batch position and
every RNG state (training_state.py), and continues exactly as if it had not stopped.
"""

from __future__ import annotations

import dataclasses
import math
import time

import torch
from tqdm import tqdm

from transformer.batching import BatchIterator
from transformer.checkpoint import (
    capture_rng_state,
    read_checkpoint,
    restore_rng_state,
    unwrap_model,
)
from transformer.config import Config, ModelConfig, TrainConfig, config_to_dict
from transformer.dataset import prepare_data
from transformer.distributed import (
    DistributedContext,
    all_gather_object,
    barrier,
    broadcast_object,
    resolve_device,
)
from transformer.metrics import MetricsLog, TrainWindow
from transformer.model import Transformer
from transformer.optim import build_lr_schedule, build_optimizer
from transformer.precision import autocast, grad_scaler, resolve_precision
from transformer.run_directory import RunDirectory
from transformer.train_step import UpdateResult, UpdateStep
from transformer.training_state import (
    TrainState,
    restore_training_checkpoint,
    seed_everything,
    training_checkpoint,
)
from transformer.validation import (
    is_improvement,
    validation_bleu,
    validation_loss,
)

# With skip_nonfinite, this many non-finite updates in a row still stop training.
MAX_CONSECUTIVE_SKIPS = 100


class NonFiniteLossError(FloatingPointError):
    """The loss of an update was NaN or Inf (training stopped; the last checkpoint is kept)."""


def derive_update_freq(train: TrainConfig, world_size: int) -> int:
    """Micro-batches per update: `update_freq`, or ceil(tokens_per_update / (max_tokens * world)).

    Raises:
        ValueError: when both `tokens_per_update` and a non-default `update_freq` are set.
    """
    if train.tokens_per_update is None:
        return train.update_freq
    if train.update_freq != 1:
        raise ValueError(
            f"set either train.tokens_per_update ({train.tokens_per_update}) or "
            f"train.update_freq ({train.update_freq}), not both"
        )
    return max(1, math.ceil(train.tokens_per_update / (train.max_tokens * world_size)))


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

    Raises:
        ValueError: invalid options, or a checkpoint that does not fit the model.
    """

    def __init__(
        self,
        config: Config,
        context: DistributedContext | None = None,
        resume: bool = True,
        log=tqdm.write,
    ) -> None:
        train = config.train
        self.context = context or DistributedContext(device=resolve_device(train.device))
        self.device, world, rank = self.context.device, self.context.world_size, self.context.rank
        self.log = log if self.context.is_main else (lambda message: None)
        if train.num_threads:
            torch.set_num_threads(train.num_threads)
        torch.set_flush_denormal(train.flush_denormal)
        self.precision = resolve_precision(train.precision, self.device)
        self.update_freq = derive_update_freq(train, world)
        self.run_dir = RunDirectory(train.output_dir)
        # Rank 0 trains (or finds) the SentencePiece model and caches the data; then the others.
        prepared = None
        if self.context.is_main:
            self.run_dir.create()
            prepared = prepare_data(config.data, self.run_dir.path, train=True, log=self.log)
        barrier(self.context)
        self.prepared = prepared or prepare_data(config.data, self.run_dir.path, log=None)
        self.tokenizer = self.prepared.tokenizer
        self.config = dataclasses.replace(
            config, model=model_config_for(config.model, self.tokenizer)
        )
        if train.best_metric in ("bleu", "chrf") and train.valid_bleu_sentences == 0:
            raise ValueError(
                f"train.best_metric is {train.best_metric!r} but train.valid_bleu_sentences is 0"
                " (no BLEU is computed); choose best_metric loss or ppl"
            )

        seed_everything(train.seed)
        self.model = Transformer(self.config.model).to(self.device)
        self.optimizer = build_optimizer(self.model, train)
        self.schedule = build_lr_schedule(self.optimizer, train, self.config.model.d_model)
        self.scaler = grad_scaler(self.precision, self.device)
        model = self.config.model
        ids = dict(pad_id=model.pad_id, bos_id=model.bos_id, eos_id=model.eos_id)
        self.batches = BatchIterator(
            self.prepared.train,
            train.max_tokens,
            seed=train.seed,
            rank=rank,
            world_size=world,
            **ids,
        )
        self.valid_batches = None
        if self.prepared.valid is not None and train.validate_interval_steps > 0:
            self.valid_batches = BatchIterator(
                self.prepared.valid, train.max_tokens, shuffle=False, **ids
            )
        self.state = TrainState()
        self.metrics = MetricsLog(self.run_dir.metrics_path)
        if resume and self.run_dir.last_path.is_file():
            self._resume()
        else:
            if self.context.is_main:
                if self.run_dir.last_path.is_file():
                    self.log(
                        f"starting fresh in {self.run_dir.path} (existing checkpoints ignored)"
                    )
                self.metrics.truncate_after(0)
            if self.context.enabled:  # identical initial weights, different dropout masks
                torch.manual_seed(train.seed + rank)

        self.ddp = None
        forward_model: torch.nn.Module = self.model
        if self.context.enabled:
            device_ids = [self.device] if self.device.type == "cuda" else None
            self.ddp = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=device_ids)
            forward_model = self.ddp
        self.update = UpdateStep(
            model=self.model,
            forward_model=torch.compile(forward_model) if train.compile else forward_model,
            ddp=self.ddp,
            optimizer=self.optimizer,
            schedule=self.schedule,
            scaler=self.scaler,
            context=self.context,
            precision=self.precision,
            label_smoothing=train.label_smoothing,
            pad_id=self.config.model.pad_id,
            clip_norm=train.clip_norm,
        )

    def checkpoint_state(self) -> dict | None:
        """The full checkpoint dict on rank 0 (None elsewhere); collective: call on all ranks."""
        rng = all_gather_object(capture_rng_state(), self.context)
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
            state=self.state,
            precision=self.precision,
        )

    def _resume(self) -> None:
        path = self.run_dir.last_path
        checkpoint = read_checkpoint(path, map_location=self.device)
        self.state = restore_training_checkpoint(
            checkpoint,
            path,
            model=self.model,
            optimizer=self.optimizer,
            schedule=self.schedule,
            scaler=self.scaler,
            batches=self.batches,
        )
        rng = checkpoint["rng"]
        if len(rng) == self.context.world_size:
            restore_rng_state(rng[self.context.rank])
        else:
            self.log(
                f"{path} was written by {len(rng)} process(es), now {self.context.world_size}: "
                "random states are re-seeded, so the run will not repeat bit for bit"
            )
            seed_everything(self.config.train.seed + self.state.step + self.context.rank)
        if self.context.is_main:
            self.metrics.truncate_after(self.state.step)
        self.log(f"resumed from {path} at step {self.state.step}")

    def _save(self, numbered: bool, best: bool) -> None:
        """Write checkpoint_last.pt (and numbered / best ones); collective."""
        self.state.elapsed_seconds = self._elapsed()
        state = self.checkpoint_state()
        if state is None:
            return
        if numbered or not best:
            keep = self.config.train.keep_last
            self.run_dir.save(state, self.state.step, keep, numbered=numbered, best=best)
        else:
            self.run_dir.save_best(state)

    def validate(self) -> dict:
        """Validation loss, perplexity and (unless disabled) greedy BLEU, computed on rank 0
        and broadcast, so that every process takes the same best/early-stop decisions."""
        train = self.config.train
        metrics = None
        if self.context.is_main:
            model = unwrap_model(self.model)
            precision = autocast(self.precision, self.device)
            metrics = validation_loss(
                model,
                self.valid_batches.epoch(1),
                train.label_smoothing,
                self.config.model.pad_id,
                self.device,
                precision,
            )
            n = train.valid_bleu_sentences
            if n != 0:
                src = self.prepared.valid_src_text[:n] if n else self.prepared.valid_src_text
                ref = self.prepared.valid_ref_text[: len(src)]
                lang = self.config.data.target_lang
                with autocast(self.precision, self.device):
                    scores = validation_bleu(
                        model, self.tokenizer, src, ref, lang, self.device, self.config.decode
                    )
                metrics.update(scores)
            model.train()
        return broadcast_object(metrics, self.context)

    def _record_validation(self, metrics: dict) -> tuple[bool, bool]:
        """Update the best/early-stopping counters and log. Returns (is_best, stop_early)."""
        train, state = self.config.train, self.state
        is_best = is_improvement(train.best_metric, metrics[train.best_metric], state.best_metric)
        if is_best:
            state.best_metric, state.best_step = metrics[train.best_metric], state.step
            state.bad_validations = 0
        else:
            state.bad_validations += 1
        patience = train.early_stop_patience
        stop_early = patience is not None and state.bad_validations >= patience
        if self.context.is_main:
            record = {"type": "valid", "step": state.step, **metrics, "best": is_best}
            self.metrics.write({**record, "elapsed_minutes": self._elapsed() / 60})
            shown = " ".join(
                f"{k} {metrics[k]:.4g}" for k in ("loss", "ppl", "bleu") if k in metrics
            )
            self.log(f"validation at step {state.step}: {shown}" + (" (best)" if is_best else ""))
        return is_best, stop_early

    def _elapsed(self) -> float:
        """Training wall time in seconds, including earlier runs of a resumed job."""
        return self._elapsed_before + time.monotonic() - self._started

    def _describe(self) -> None:
        """Print what will run: device, precision, model size, effective batch."""
        train, world = self.config.train, self.context.world_size
        params = sum(p.numel() for p in self.model.parameters())
        self.log(
            f"run directory {self.run_dir.path}; device {self.device} x {world} process(es); "
            f"precision {self.precision}; {params:,} parameters"
        )
        self.log(
            f"effective tokens per update: up to {train.max_tokens * self.update_freq * world:,} "
            f"per side, padding included (max_tokens {train.max_tokens} x update_freq "
            f"{self.update_freq} x {world} process(es))"
        )

    def train(self) -> TrainState:
        """Train until max_steps, max_minutes, max_epochs or early stopping; checkpoint at the end.

        Returns:
            The final `TrainState` (with `stop_reason`).

        Raises:
            NonFiniteLossError: on a NaN/Inf loss unless `train.skip_nonfinite` (the last good
                checkpoint is left as it is).
        """
        train, state = self.config.train, self.state
        if self.context.is_main:
            self.run_dir.write_config(config_to_dict(self.config))
            self._describe()
        self._started, self._elapsed_before = time.monotonic(), state.elapsed_seconds
        last_save, saved_step, validated_step = time.monotonic(), state.step, state.step
        consecutive_skips, window, stream, stop = 0, TrainWindow(), iter(self.batches), None
        bar = tqdm(
            total=train.max_steps,
            initial=state.step,
            disable=not self.context.is_main,
            desc="train",
            dynamic_ncols=True,
        )
        while stop is None:
            if state.step >= train.max_steps:
                stop = "max_steps"
                break
            if (
                train.max_epochs is not None
                and self.batches.state_dict()["epoch"] > train.max_epochs
            ):
                stop = "max_epochs"
                break
            micro_batches = [next(stream) for _ in range(self.update_freq)]
            lr = self.schedule.lr
            time_up = train.max_minutes is not None and self._elapsed() >= train.max_minutes * 60
            save_due = train.save_interval_minutes is not None and (
                time.monotonic() - last_save >= train.save_interval_minutes * 60
            )
            result = self.update(micro_batches, [time_up, save_due])
            if result.applied:
                state.step += 1
            time_up, save_due = result.flags
            consecutive_skips = 0 if result.finite else consecutive_skips + 1
            if not result.finite:
                self._handle_nonfinite(result, consecutive_skips)
            if not result.applied:
                continue
            bar.update(1)
            window.add(result.loss_sum, result.nll_sum, result.tokens)
            if state.step % train.log_interval_steps == 0 or state.step == train.max_steps:
                self._log_train(window, lr, result, bar)
            is_best = stop_early = False
            if self.valid_batches is not None and state.step % train.validate_interval_steps == 0:
                is_best, stop_early = self._record_validation(self.validate())
                validated_step = state.step
            if time_up or stop_early or state.step >= train.max_steps:
                stop = "max_minutes" if time_up else "early_stopping" if stop_early else "max_steps"
                if self.valid_batches is not None and validated_step != state.step:
                    is_best, _ = self._record_validation(self.validate())
            periodic = (
                bool(train.save_interval_steps) and state.step % train.save_interval_steps == 0
            )
            if periodic or save_due or stop is not None:
                self._save(numbered=True, best=is_best)
                saved_step, last_save = state.step, time.monotonic()
            elif is_best:
                self._save(numbered=False, best=True)
        bar.close()
        if saved_step != state.step:
            self._save(numbered=True, best=False)
        state.stop_reason = stop
        best = ""
        if state.best_metric is not None:
            best = f"; best {train.best_metric} {state.best_metric:.4g} at step {state.best_step}"
        self.log(f"stopped at step {state.step} ({stop}){best}")
        return state

    def _log_train(self, window: TrainWindow, lr: float, result: UpdateResult, bar: tqdm) -> None:
        """Write the metrics.jsonl record of the updates since the last one."""
        record = window.record(self.state.step, lr)
        record["epoch"] = self.batches.state_dict()["epoch"]
        record["skipped_updates"] = self.state.skipped_updates
        record["elapsed_minutes"] = self._elapsed() / 60
        if result.grad_norm is not None:
            record["grad_norm"] = result.grad_norm
        if self.context.is_main:
            self.metrics.write(record)
            bar.set_postfix(
                loss=f"{record['loss']:.3f}",
                lr=f"{lr:.2e}",
                tok_s=f"{record['tokens_per_second']:.0f}",
                refresh=False,
            )
        window.reset()

    def _handle_nonfinite(self, result: UpdateResult, consecutive: int) -> None:
        """Skip and count the update (`skip_nonfinite`), or stop with a clear message."""
        train = self.config.train
        step = self.state.step + 1
        value = result.loss_sum / max(result.tokens, 1)
        if train.skip_nonfinite and consecutive < MAX_CONSECUTIVE_SKIPS:
            self.state.skipped_updates += 1
            self.log(
                f"warning: non-finite loss ({value}) at step {step}: update skipped "
                f"({self.state.skipped_updates} skipped so far)"
            )
            return
        last = self.run_dir.last_path
        kept = (
            f"the last good checkpoint {last} is kept"
            if last.is_file()
            else ("no checkpoint had been written yet")
        )
        why = (
            f"{consecutive} non-finite updates in a row"
            if train.skip_nonfinite
            else ("set train.skip_nonfinite=true to skip such updates instead")
        )
        raise NonFiniteLossError(
            f"non-finite loss ({value}) at step {step}; training stopped and {kept} ({why}). "
            "Lower the learning rate (train.lr_scale / train.peak_lr), raise "
            "train.warmup_steps, or use train.clip_norm / train.precision=fp32."
        )
