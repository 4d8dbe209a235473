"""Item 4 of the benchmark: training tokens/s and model FLOPs utilisation (MFU) on a GPU.

Our base and big models train in bf16 autocast with fused SDPA attention and `torch.compile`,
on full-length random batches (no padding, so the FLOP count below is exact).

MFU = achieved training FLOP/s / the GPU's peak dense bf16 FLOP/s. The FLOPs per step are
those the training logs use, `transformer.train.flops.training_flops`: 6 x (matmul weights x
the tokens they process) plus 3 x 2 x 2 x D per query-key pair per layer (encoder S*S, decoder
self T*T counted in full, cross T*S); embeddings, LayerNorm, softmax and biases not counted
(Kaplan et al., 2020; Chowdhery et al., 2022, appendix B). The peak is the table's entry for
the exact GPU model (`transformer.train.flops.PEAK_TFLOPS`) or `--peak-tflops`; a GPU missing
from both gets tokens/s and no MFU.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict

import torch

from benchmarks.engines import BOS_ID, EOS_ID, FIRST_WORD_ID, Dims, Engine
from benchmarks.report import ratio_summary, summary
from transformer.train.flops import PEAK_TFLOPS, peak_tflops, training_flops

CONFIGS = {
    "base": Dims(),
    "big": Dims(d_model=1024, d_ff=4096, n_heads=16, dropout=0.3),
}


def bf16_peak_tflops(device_name: str, override: float | None) -> float | None:
    """The GPU's dense bf16 peak in TFLOP/s: `override`, else the table's, else None."""
    return override if override is not None else peak_tflops(device_name, "bf16")


def full_length_batch(batch_size: int, length: int, vocab_size: int, seed: int) -> dict:
    """Random batch without padding: src (B, L), tgt_in = bos + words, tgt_out = words + eos."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(FIRST_WORD_ID, vocab_size, (batch_size, length), generator=g)
    words = torch.randint(FIRST_WORD_ID, vocab_size, (batch_size, length - 1), generator=g)
    tgt_in = torch.cat((torch.full((batch_size, 1), BOS_ID), words), dim=1)  # (B, L)
    tgt_out = torch.cat((words, torch.full((batch_size, 1), EOS_ID)), dim=1)  # (B, L)
    return {"src": src.tolist(), "tgt_in": tgt_in.tolist(), "tgt_out": tgt_out.tolist()}


def measure_mfu(
    dims: Dims,
    batch_size: int,
    length: int,
    warmup_steps: int,
    steps: int,
    peak: float | None,
    device: str = "cuda",
    compile_model: bool = True,
    bf16: bool = True,
) -> dict:
    """Train our model for `steps` timed steps; tokens/s, MFU and peak memory per step.

    Args:
        peak: Peak FLOP/s of the device (FLOP/s, not TFLOP/s), or None: no MFU.
        device, compile_model, bf16: "cuda" with torch.compile and bf16 for the real figure
            (the tests run it on the CPU without compile).

    Returns:
        {"step_seconds", "target_tokens_per_second", "mfu", "flops_per_step", "peak_memory_mib",
        "parameters"} with per-step lists for the first three ("mfu" None without a peak).
    """
    from benchmarks.machine import peak_memory_mib, reset_peak_memory

    engine = Engine("ours", dims, seed=0, device=device, compile_model=compile_model)
    batch = full_length_batch(batch_size, length, dims.vocab_size, seed=5)
    engine.train(batch, warmup_steps, bf16=bf16)  # includes compilation
    reset_peak_memory(engine.device.type)
    timed = engine.train(batch, steps, bf16=bf16)
    lengths = [length] * batch_size  # every sentence full length: no padding
    flops = training_flops(dims.model_config(), lengths, lengths)
    seconds = [s["seconds"] for s in timed]
    return {
        "step_seconds": seconds,
        "target_tokens_per_second": [s["tokens"] / s["seconds"] for s in timed],
        "mfu": None if peak is None else [flops / s / peak for s in seconds],
        "flops_per_step": flops,
        "peak_memory_mib": peak_memory_mib(engine.device.type),
        "parameters": engine.describe()["parameters"],
    }


def run_cuda_benchmark(settings, quick: bool, peak_override: float | None) -> dict:
    """Item 4 for the base and big configs; returns the report body (figures, ratios).

    Raises:
        RuntimeError: when CUDA is not available.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("--device cuda: no CUDA device is available")
    settings.apply()
    gpu = torch.cuda.get_device_name()
    tflops = bf16_peak_tflops(gpu, peak_override)
    if tflops is None:
        print(
            f"[benchmark] cuda: no peak bf16 FLOP/s known for {gpu!r} (known: "
            f"{', '.join(PEAK_TFLOPS)}); MFU not reported, pass --peak-tflops for it",
            flush=True,
        )
    peak = None if tflops is None else tflops * 1e12
    batch_size, length = (64, 64) if quick else (192, 128)
    warmup, steps = (3, 5) if quick else (5, 20)
    figures, ratio_stats, engines = {}, {}, {}
    for name, dims in CONFIGS.items():
        print(f"[benchmark] cuda: {name} model, B={batch_size}, L={length} ...", flush=True)
        result = measure_mfu(dims, batch_size, length, warmup, steps, peak)
        engines[name] = {"dims": asdict(dims), "parameters": result["parameters"]}
        figures[f"cuda_{name}_bf16_tokens_per_s"] = summary(
            result["target_tokens_per_second"], "target tokens/s"
        )
        figures[f"cuda_{name}_bf16_step"] = summary(result["step_seconds"], "seconds/step")
        figures[f"cuda_{name}_bf16_peak_memory"] = summary(
            [result["peak_memory_mib"]], "MiB (CUDA allocated)"
        )
        mfu = result["mfu"]
        if mfu is not None:
            ratio_stats[f"mfu_{name}_bf16"] = ratio_summary(mfu, [1.0] * len(mfu))
            print(f"[benchmark] cuda: {name} MFU median {statistics.median(mfu):.3f}", flush=True)
    peak_note = "no MFU (peak unknown)" if tflops is None else f"peak {tflops:.1f} TFLOP/s"
    return {
        "engines": engines,
        "figures": figures,
        "ratio_stats": ratio_stats,
        "dims_note": f"base and big, B={batch_size}, L={length} (no padding), bf16, SDPA, "
        f"torch.compile; {peak_note}",
        "plan": {"batch_size": batch_size, "length": length, "warmup": warmup, "steps": steps},
        "cache_check": None,
    }
