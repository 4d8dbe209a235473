"""benchmarks/plan.py: the full plan measures the paper's base model, the quick one less."""

from __future__ import annotations

from dataclasses import fields

from benchmarks.plan import full_plan, quick_plan


def test_the_full_plan_is_the_papers_base_model():
    dims = full_plan().dims  # Table 3, base: d_model 512, d_ff 2048, h 8, N 6; 5.1: V ~ 37000
    assert (dims.d_model, dims.d_ff, dims.n_heads, dims.n_layers) == (512, 2048, 8, 6)
    assert dims.vocab_size == 37000


def test_the_quick_plan_is_no_larger_anywhere():
    full, quick = full_plan(), quick_plan()
    for f in fields(full.dims):
        if f.name not in ("dropout", "max_positions"):
            assert getattr(quick.dims, f.name) <= getattr(full.dims, f.name), f.name
    for name in ("train_batch", "train_length", "train_rounds", "decode_batch", "decode_rounds"):
        assert getattr(quick, name) <= getattr(full, name), name
    assert quick.mode == "quick" and full.mode == "full"
