"""The `train:` section of a config: the paper's training recipe (Vaswani et al., 2017, section 5).

Part of the typed configuration of `transformer.config` (which re-exports `TrainConfig`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from transformer.cpu.onednn import LINEAR_KERNELS
from transformer.device import check_device_name
from transformer.train.batch_plan import BatchPlan

LR_SCHEDULES = ("noam", "inverse_sqrt")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
# Lower is better for every metric except BLEU and chrF.
HIGHER_IS_BETTER = {"bleu": True, "chrf": True, "loss": False, "nll_loss": False, "ppl": False}
# The metrics that validation computes by decoding (greedy sacreBLEU), not from the loss.
DECODED_METRICS = ("bleu", "chrf")
# Seeds go to torch.manual_seed (64 bits) and NumPy generators, with the step and rank added
# when a resumed run re-seeds; below 2**63 leaves room for those.
SEED_LIMIT = 2**63
# torch.set_num_threads far beyond any machine's cores crashes the process.
MAX_NUM_THREADS = 1024


def without_unused_lr_knob(train: dict) -> dict:
    """A stored `train:` section without the other schedule's knob, which its run ignored.

    Checkpoints written before `TrainConfig` refused `peak_lr` with "noam" (or `lr_scale` with
    "inverse_sqrt") may hold one; it never changed their learning rate, so it is dropped.

    Args:
        train: The section's keys as stored.

    Returns:
        A copy without `peak_lr` under "noam" (the default) or `lr_scale` under "inverse_sqrt".
    """
    unused = "lr_scale" if train.get("lr_schedule") == "inverse_sqrt" else "peak_lr"
    return {key: value for key, value in train.items() if key != unused}


@dataclass(frozen=True)
class TrainConfig:
    """The `train:` section: the paper's training recipe (section 5) and run control.

    Args:
        output_dir: Run directory: config.yaml, SentencePiece model, checkpoints, metrics.jsonl.
        max_steps: Stop after this many updates (100k for base, 300k for big).
        max_minutes: Also stop (with a checkpoint) after this much training wall time,
            summed over resumed runs; null = no limit.
        max_epochs: Also stop after this many passes over the training data; null = no limit.
        max_tokens: Tokens per side per micro-batch per process, padding included.
        update_freq: Micro-batches accumulated per update.
        tokens_per_update: Instead of `update_freq`: the tokens per side of one update over
            all processes (25000 in the paper); `max_tokens` is then the per-process cap, and
            update_freq and the micro-batch size are derived for the number of processes
            (`TrainConfig.batch_plan`).
        lr_schedule: "noam" (the paper's, equation 3) or "inverse_sqrt" (fairseq: linear
            warm-up to `peak_lr`, then ~ step^-0.5).
        lr_scale: Factor on the noam rate (1 in the paper).
        peak_lr: Peak rate of "inverse_sqrt".
        warmup_steps: Warm-up updates (4000 in the paper).
        cooldown_fraction: Over the last this part of the run's budget (`max_minutes`, or
            `max_steps`, whichever is nearer to being spent), the rate falls linearly to 0
            (`transformer.train.optim.Cooldown`); 0 = off (the paper).
        adam_betas, adam_eps: Adam's (0.9, 0.98) and 1e-9 (section 5.3).
        weight_decay: Adam weight decay (0 in the paper): the L2 form (added to the gradient),
            or with `decoupled_weight_decay` AdamW's (Loshchilov and Hutter, 2019).
        decoupled_weight_decay: Decay the weights directly, by lr x weight_decay per update
            (`torch.optim.AdamW`), instead of through Adam's gradient.
        label_smoothing: epsilon_ls (0.1, section 5.4).
        ema_decay: Keep an exponential moving average of the weights with this decay per
            update, in (0, 1), written as checkpoint_ema.pt with every checkpoint
            (`transformer.train.ema`); null = none (the paper averages checkpoints instead).
        clip_norm: Clip the gradient norm to this; null = no clipping (the paper).
        precision: "auto" (bf16 autocast on GPUs with native bf16, fp16 on older GPUs, fp32
            elsewhere), "fp32", "bf16" (autocast; also on CPU), "fp16" (autocast + gradient
            scaling).
        compile: Run the model through torch.compile.
        deterministic: Deterministic kernels only (`torch.use_deterministic_algorithms`, the
            math SDPA backend on CUDA, cuBLAS's fixed workspace), so that a resumed CUDA run is
            bit-identical to an uninterrupted one; slower on GPUs (see README.md, "Resume").
            Without it a resumed run restores the same state, but on CUDA its later updates
            may differ in the last bits (the fused attention backward passes sum in a varying
            order). CPU training is deterministic either way.
        peak_tflops: The GPU's peak dense TFLOP/s at the training precision, for the MFU of
            the training log; null = looked up by GPU model (`transformer.train.flops`).
        linear_kernel: Float32 CPU matrix products: "auto" (oneDNN on x86-64 CPUs, faster there:
            BENCHMARKS.md), "onednn" or "torch" (`torch.nn.functional.linear`); applied to
            the built model by `transformer.cpu.onednn`, never stored in the model config.
        device: "auto" (CUDA when present), "cpu", "cuda", "cuda:N" (or "mps" on Apple
            silicon); checked by `transformer.device.resolve_device`. Under torchrun "cuda"
            and "auto" mean each process's own GPU, and "cuda:N" is refused.
        seed: Seeds weights initialisation, dropout and batch shuffling; 0 <= seed < 2**63.
        save_interval_steps: Numbered checkpoint every this many updates; null/0 = off.
        save_interval_minutes: Numbered checkpoint every this many minutes (the paper: 10).
        keep_last: Numbered checkpoints kept (older ones are deleted); last/best always kept.
        log_interval_steps: Updates per metrics.jsonl training record.
        tensorboard: Also write every metrics.jsonl record's numbers as TensorBoard scalars
            into output_dir/tensorboard/ (rank 0; needs the tensorboard package, checked
            before any work; `transformer.train.tensorboard_log`).
        validate_interval_steps: Updates between validations; 0 = never.
        valid_bleu_sentences: Validation sentences decoded for BLEU; null = all, 0 = no BLEU.
        best_metric: Chooses checkpoint_best.pt: "bleu", "chrf" (higher is better), "loss",
            "nll_loss", "ppl" (lower is better).
        early_stop_patience: Stop after this many validations without improvement; null = off.
        skip_nonfinite: Skip (and count) updates with a NaN/Inf loss instead of stopping.
        num_threads: torch.set_num_threads for CPU training, 1 to 1024; null = torch's default.
        flush_denormal: torch.set_flush_denormal(True), a guard: CPUs compute slowly on
            denormal floats.
        keep_freed_memory: CPU training: glibc's malloc keeps the memory of freed tensors for
            the next step instead of unmapping it (fewer page faults, faster: BENCHMARKS.md;
            the process keeps the memory of its largest step); `transformer.cpu.malloc`.

    Raises:
        ValueError: for a value out of range, naming the key.
    """

    output_dir: str = "checkpoints/run"
    max_steps: int = 100_000
    max_minutes: float | None = None
    max_epochs: int | None = None
    max_tokens: int = 4096
    update_freq: int = 1
    tokens_per_update: int | None = None
    lr_schedule: str = "noam"
    lr_scale: float = 1.0
    peak_lr: float | None = None
    warmup_steps: int = 4000
    cooldown_fraction: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    decoupled_weight_decay: bool = False
    label_smoothing: float = 0.1
    ema_decay: float | None = None
    clip_norm: float | None = None
    precision: str = "auto"
    compile: bool = False
    deterministic: bool = False
    peak_tflops: float | None = None
    linear_kernel: str = "auto"
    device: str = "auto"
    seed: int = 1
    save_interval_steps: int | None = 1000
    save_interval_minutes: float | None = None
    keep_last: int = 5
    log_interval_steps: int = 100
    tensorboard: bool = False
    validate_interval_steps: int = 1000
    valid_bleu_sentences: int | None = None
    best_metric: str = "bleu"
    early_stop_patience: int | None = None
    skip_nonfinite: bool = False
    num_threads: int | None = None
    flush_denormal: bool = True
    keep_freed_memory: bool = True

    def __post_init__(self) -> None:
        choices = {
            "lr_schedule": LR_SCHEDULES,
            "precision": PRECISIONS,
            "best_metric": tuple(HIGHER_IS_BETTER),
            "linear_kernel": LINEAR_KERNELS,
        }
        if not str(self.output_dir).strip():
            raise ValueError("train.output_dir is empty: name the run directory")
        check_device_name(self.device, what="train.device")
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"train.{name} ({getattr(self, name)!r}) must be one of {', '.join(allowed)}"
                )
        at_least_one = (
            "max_steps",
            "max_tokens",
            "update_freq",
            "warmup_steps",
            "log_interval_steps",
            "tokens_per_update",
            "max_epochs",
            "early_stop_patience",
            "num_threads",
        )
        for name in at_least_one:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"train.{name} ({value}) must be at least 1")
        for name in (
            "keep_last",
            "validate_interval_steps",
            "save_interval_steps",
            "valid_bleu_sentences",
        ):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"train.{name} ({value}) must not be negative")
        for name in (
            "max_minutes",
            "save_interval_minutes",
            "clip_norm",
            "peak_lr",
            "lr_scale",
            "peak_tflops",
        ):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"train.{name} ({value}) must be positive")
        for name in ("peak_lr", "lr_scale", "peak_tflops"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"train.{name} ({value}) must be finite")
        if not (math.isfinite(self.adam_eps) and self.adam_eps > 0):
            raise ValueError(f"train.adam_eps ({self.adam_eps}) must be a finite number > 0")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"train.weight_decay ({self.weight_decay}) must be finite and >= 0")
        betas = list(self.adam_betas)
        if len(betas) != 2 or not all(0.0 <= beta < 1.0 for beta in betas):
            raise ValueError(f"train.adam_betas ({betas}) must be two numbers in [0, 1)")
        if not 0 <= self.seed < SEED_LIMIT:
            raise ValueError(f"train.seed ({self.seed}) must be in [0, 2**63)")
        if self.num_threads is not None and self.num_threads > MAX_NUM_THREADS:
            raise ValueError(
                f"train.num_threads ({self.num_threads}) must be at most {MAX_NUM_THREADS}"
            )
        if not 0.0 <= self.cooldown_fraction <= 1.0:
            raise ValueError(
                f"train.cooldown_fraction ({self.cooldown_fraction}) must be in [0, 1]"
            )
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"train.label_smoothing ({self.label_smoothing}) must be in [0, 1)")
        if self.ema_decay is not None and not 0.0 < self.ema_decay < 1.0:
            raise ValueError(f"train.ema_decay ({self.ema_decay}) must be in (0, 1), or null")
        if self.lr_schedule == "inverse_sqrt" and self.peak_lr is None:
            raise ValueError("train.lr_schedule inverse_sqrt needs train.peak_lr")
        # Each schedule has one knob for its height; the other one would be silently ignored.
        if self.lr_schedule == "noam" and self.peak_lr is not None:
            raise ValueError(
                f"train.peak_lr ({self.peak_lr}) is the peak of lr_schedule inverse_sqrt; "
                "lr_schedule noam is scaled by train.lr_scale: set one of the two"
            )
        if self.lr_schedule == "inverse_sqrt" and self.lr_scale != 1.0:
            raise ValueError(
                f"train.lr_scale ({self.lr_scale}) scales lr_schedule noam only; "
                "lr_schedule inverse_sqrt peaks at train.peak_lr: drop lr_scale"
            )
        if self.best_metric in DECODED_METRICS and self.valid_bleu_sentences == 0:
            raise ValueError(
                f"train.best_metric is {self.best_metric!r} but train.valid_bleu_sentences is 0"
                " (no BLEU is computed); choose best_metric loss or ppl"
            )
        if self.tokens_per_update is not None and self.update_freq != 1:
            raise ValueError(
                f"set either train.tokens_per_update ({self.tokens_per_update}) or "
                f"train.update_freq ({self.update_freq}), not both"
            )

    def batch_plan(self, world_size: int, longest: int = 1) -> BatchPlan:
        """Micro-batch size and accumulation of one update on `world_size` processes.

        With `tokens_per_update` (the paper's ~25000 tokens per side), `max_tokens` is the
        largest micro-batch a process may take (its memory cap): update_freq =
        ceil(tokens_per_update / (max_tokens * world_size)), and each micro-batch then holds
        ceil(tokens_per_update / (update_freq * world_size)) tokens, so that every GPU count
        lands on the target (8 GPUs x 3125 x 1 = 25000; 1 GPU x 6250 x 4 = 25000). A
        micro-batch never drops below `longest` tokens (one pair of the longest length must
        fit), which can put the update above the target on many processes.
        Without `tokens_per_update`: `max_tokens` and `update_freq` as given.

        Args:
            world_size: Processes of the job.
            longest: Tokens of the longest sequence a micro-batch must hold.

        Returns:
            The `BatchPlan`.
        """
        if self.tokens_per_update is None:
            return BatchPlan(self.max_tokens, self.update_freq, world_size, None)
        target = self.tokens_per_update
        update_freq = max(1, math.ceil(target / (self.max_tokens * world_size)))
        max_tokens = math.ceil(target / (update_freq * world_size))
        max_tokens = min(self.max_tokens, max(max_tokens, longest))
        return BatchPlan(max_tokens, update_freq, world_size, target)
