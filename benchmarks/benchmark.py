"""Speed and memory of our Transformer against torch.nn.Transformer and Hugging Face Marian.

    python -m benchmarks.benchmark --quick                       # smaller dims, fewer rounds
    python -m benchmarks.benchmark --json BENCHMARKS.json        # full mode, base dimensions
    python -m benchmarks.benchmark --device cuda --json gpu.json # item 4: tokens/s and MFU on a GPU

(`python benchmarks/benchmark.py ...` works too.)

What is measured (issue 6; the figures are explained in BENCHMARKS.md):
1. training tokens/s (forward, loss, backward, Adam step), float32 and bf16 autocast, ours vs
   torch.nn.Transformer vs HF MarianMTModel, same dimensions and batch;
2. decoding sentences/s, greedy and beam 4, ours vs HF `generate` and vs our search without the
   key/value cache, EOS suppressed so every output has the same length; our cached greedy output
   must equal the no-cache output token for token, or the benchmark fails;
3. scaling: our decoding time for 25/50/100/200 output tokens, training step time and peak memory
   for sequence lengths 32/64/128/256;
4. (--device cuda) tokens/s and MFU with bf16, SDPA and torch.compile (`benchmarks/cuda.py`).

Fairness: each engine runs in its own worker process with the same threads and denormal setting;
engines alternate round by round (A B A B ...) after warm-up, and every ratio is the median of the
per-round ratios. The machine load is recorded at start and end and during every timed call.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

if __package__ in (None, ""):  # run as `python benchmarks/benchmark.py`, not with -m:
    # import from the repo root, and take benchmarks/ off sys.path before torch is imported
    # (its cuda.py would shadow NVIDIA's `cuda` package, which torch imports if present);
    # the spawned workers inherit this sys.path
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [str(_HERE.parent), *(p for p in sys.path if p != str(_HERE))]

from benchmarks.cpu_rounds import (  # noqa: E402
    CacheMismatchError,
    check_cache_equality,
    run_cpu_benchmark,
)
from benchmarks.machine import machine_info, machine_load, source_revision  # noqa: E402
from benchmarks.plan import Plan, full_plan, quick_plan  # noqa: E402
from benchmarks.report import check_targets, format_table, load_verdict  # noqa: E402
from benchmarks.workers import ProcessSettings  # noqa: E402
from transformer.atomic import atomic_write_text  # noqa: E402

# Re-exported: the tests and callers import them from here.
__all__ = ["CacheMismatchError", "Plan", "check_cache_equality", "full_plan", "main", "quick_plan"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller dims, fewer rounds")
    parser.add_argument("--json", type=Path, help="write the report as JSON to this path")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-hf", action="store_true", help="skip Hugging Face (not installed)")
    parser.add_argument(
        "--peak-tflops",
        type=float,
        help="GPU dense bf16 peak TFLOP/s for the MFU of item 4 (default: the table of "
        "transformer/train/flops.py, by exact GPU name)",
    )
    args = parser.parse_args(argv)
    if args.peak_tflops is not None and not 0 < args.peak_tflops < float("inf"):
        parser.error(f"--peak-tflops ({args.peak_tflops}) must be a positive number")
    return args


def _missing_requirement(args, hf_planned: bool) -> str | None:
    """What this machine lacks for the asked-for run (a GPU, the Hugging Face peer), or None."""
    import importlib.util

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        return "--device cuda: no CUDA device is available (drop --device cuda for the CPU run)"
    if (
        args.device != "cuda"
        and not args.no_hf
        and importlib.util.find_spec("transformers") is None
    ):
        return "the Hugging Face peer needs transformers: pip install -e '.[bench]' (or --no-hf)"
    return None


def main(argv: list[str] | None = None, plan: Plan | None = None) -> int:
    """Run the benchmark, print the table, optionally write JSON; 1 if the cache check fails.

    Args:
        argv: Command-line arguments (default: sys.argv[1:]).
        plan: Replaces the quick/full plan (the tests pass tiny dimensions).
    """
    args = parse_args(argv)
    started = time.time()
    if plan is None:
        plan = quick_plan() if args.quick else full_plan()
    problem = _missing_requirement(args, "hf" in plan.engines)
    if problem:  # one line, before any measuring (#17: no traceback for a missing extra)
        print(f"benchmark.py: error: {problem}", file=sys.stderr)
        return 2
    settings = ProcessSettings(threads=args.threads, device=args.device)
    print("[benchmark] measuring machine load (benchmark idle) ...", flush=True)
    load_start = machine_load(plan.load_sample_seconds)
    try:
        if args.device == "cuda":
            from benchmarks.cuda import run_cuda_benchmark

            body = run_cuda_benchmark(settings, args.quick, args.peak_tflops)
        else:
            body = run_cpu_benchmark(plan, settings, with_hf=not args.no_hf)
    except CacheMismatchError as error:
        print(f"[benchmark] FAILED: {error}", file=sys.stderr)
        return 1
    load_end = machine_load(plan.load_sample_seconds)
    ratios = {name: r["median"] for name, r in body["ratio_stats"].items()}
    machine = machine_info(settings)
    report = {
        "benchmark": "benchmarks/benchmark.py",
        "command": "python -m benchmarks.benchmark "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "source": source_revision(),
        "mode": plan.mode,
        "device": args.device,
        "dims_note": body.get("dims_note", plan.dims_note),
        "plan": asdict(plan) if args.device == "cpu" else body.get("plan"),
        "machine": machine,
        "torch_version": machine["torch_version"],
        "load": load_verdict(load_start, load_end, body["figures"], os.cpu_count() or 1),
        **body,
        "ratios": ratios,
        "targets": check_targets(ratios, quick=args.quick),
        "elapsed_seconds": round(time.time() - started, 1),
    }
    report.setdefault("cache_check", None)
    print(format_table(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json, json.dumps(report, indent=2) + "\n")
        print(f"[benchmark] wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
