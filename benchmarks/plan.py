"""What one run of `benchmarks/benchmark.py` measures: dimensions and repetition counts."""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks.engines import Dims


@dataclass(frozen=True)
class Plan:
    """Sizes and repetition counts of one benchmark run (see `quick_plan` / `full_plan`)."""

    mode: str
    dims: Dims
    dims_note: str
    train_batch: int = 16
    train_length: int = 32
    warmup_steps: int = 1
    steps_per_round: int = 1
    train_rounds: int = 5
    decode_batch: int = 8
    decode_src_length: int = 24
    decode_length: int = 50
    decode_rounds: int = 5
    beam_size: int = 4
    scaling_decode_batch: int = 4
    scaling_decode_lengths: tuple[int, ...] = (25, 50, 100, 200)
    scaling_decode_rounds: int = 3
    scaling_train_batch: int = 4
    scaling_train_lengths: tuple[int, ...] = (32, 64, 128, 256)
    scaling_train_steps: int = 2
    engines: tuple[str, ...] = field(default=("ours", "torch_nn", "hf"))
    train_dtypes: tuple[str, ...] = ("fp32", "bf16")
    load_sample_seconds: float = 2.0


def full_plan() -> Plan:
    """Base dimensions (Table 3): d_model 512, d_ff 2048, 8 heads, 6 + 6 layers, V = 37000."""
    return Plan("full", Dims(), "base dimensions (512/2048/8 heads/6+6 layers, V=37000)")


def quick_plan() -> Plan:
    """Smaller dimensions and fewer rounds, so that the run takes a few minutes on 2 cores."""
    dims = Dims(vocab_size=8000, d_model=256, d_ff=1024, n_heads=4, n_layers=2)
    note = "QUICK: smaller dims (256/1024/4 heads/2+2 layers, V=8000), fewer rounds"
    return Plan(
        "quick",
        dims,
        note,
        train_batch=8,
        train_length=24,
        train_rounds=3,
        decode_batch=4,
        decode_src_length=16,
        decode_length=20,
        decode_rounds=3,
        scaling_decode_batch=2,
        scaling_decode_rounds=2,
        scaling_train_batch=2,
        scaling_train_lengths=(32, 64, 128, 256),
        scaling_train_steps=1,
    )
