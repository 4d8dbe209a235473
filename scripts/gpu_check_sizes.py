"""The sizes of `scripts/gpu_check.py`'s two modes: the GPU check and its CPU dry run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    """The sizes of one mode of the check: the GPU check, or its CPU dry run.

    Attributes:
        device, precision: `train.device` and `train.precision` of every training run.
        tokens_per_update: `train.tokens_per_update` = `train.max_tokens` (update_freq 1).
        updates: Updates of each timed run, per model ("base", "big").
        warmup_updates: Updates left out of the steady state: (eager, compiled).
        model_overrides: Extra `model.*` overrides per model (the dry run's tiny models).
        vocab_size, synthetic_vocab: SentencePiece pieces with real data, with synthetic text.
        resume_steps, resume_vocab: Updates of the stop/resume check (stopped halfway) and its
            `data.vocab_size` (None: configs/tiny.yaml's).
        synthetic_pairs: News-like training pairs, caption-like pairs, test sentences.
        compile_env: Environment of the train.compile runs (the dry run turns compilation
            off: inductor takes about a minute on 2 CPU cores; the trainer's path is the same).
        decode_precisions, decode_max_len_b, decode_warmup, decode_sentences: The weights'
            precisions in the decoding step, the b of its maximum output length (the paper:
            input + 50), the sentences decoded first, untimed, and those timed (None: all).
        profile: (first update, updates) that each timed run profiles (gpu_check_probe.py).
        attention: The attention probe's sizes (gpu_check_probe.attention_shapes).
        budget_seconds, reserve_seconds: Default budget of the whole check; the time kept
            back for each step still to run when a step's cap is set.
    """

    device: str
    precision: str
    tokens_per_update: int
    updates: dict
    warmup_updates: tuple[int, int]
    model_overrides: dict
    vocab_size: int
    synthetic_vocab: int
    resume_steps: int
    resume_vocab: int | None
    synthetic_pairs: tuple[int, int, int]
    compile_env: dict
    decode_precisions: tuple[str, ...]
    decode_max_len_b: int
    decode_warmup: int
    decode_sentences: int | None
    profile: tuple[int, int]
    attention: dict
    budget_seconds: float
    reserve_seconds: float


GPU = Sizes(
    device="cuda",
    precision="bf16",
    tokens_per_update=25000,
    updates={"base": 100, "big": 60},
    # The first epoch of the news text (about 22 updates) meets each batch shape for the first
    # time (per-shape costs); recompilations are left out as slow updates.
    warmup_updates=(25, 25),
    model_overrides={"base": [], "big": []},
    vocab_size=37000,
    synthetic_vocab=8000,
    resume_steps=20,
    resume_vocab=None,
    synthetic_pairs=(16000, 5000, 3003),
    compile_env={},
    decode_precisions=("fp32",),  # as transformer-evaluate loads a checkpoint
    decode_max_len_b=50,
    decode_warmup=16,
    decode_sentences=None,
    profile=(30, 3),  # after the first epoch of the news text (about 22 updates)
    attention={"d_model": 512, "n_heads": 8, "tokens": 12500, "lengths": [24, 40, 56, 88]},
    budget_seconds=465.0,
    reserve_seconds=20.0,
)
_TINY = ["model.n_encoder_layers=1", "model.n_decoder_layers=1", "model.n_heads=2"]
DRY = Sizes(
    device="cpu",
    precision="fp32",
    tokens_per_update=600,
    updates={"base": 6, "big": 4},
    warmup_updates=(2, 2),
    model_overrides={
        "base": [*_TINY, "model.d_model=32", "model.d_ff=64"],
        "big": [*_TINY, "model.d_model=48", "model.d_ff=96"],
    },
    vocab_size=400,
    synthetic_vocab=400,
    resume_steps=6,
    resume_vocab=300,
    synthetic_pairs=(800, 300, 24),
    compile_env={"TORCH_COMPILE_DISABLE": "1"},
    decode_precisions=("fp32",),
    decode_max_len_b=8,
    decode_warmup=2,
    decode_sentences=24,
    profile=(1, 2),
    attention={"d_model": 32, "n_heads": 2, "tokens": 600, "lengths": [8, 16]},
    budget_seconds=170.0,
    reserve_seconds=5.0,
)
