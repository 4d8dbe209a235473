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
from dataclasses import asdict, dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as `python benchmarks/benchmark.py`, not with -m:
    # import from the repo root, and take benchmarks/ off sys.path before torch is imported
    # (its cuda.py would shadow NVIDIA's `cuda` package, which torch imports if present);
    # the spawned workers inherit this sys.path
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [str(_HERE.parent), *(p for p in sys.path if p != str(_HERE))]

from benchmarks.engines import Dims, random_batch, random_sources  # noqa: E402
from benchmarks.report import (  # noqa: E402
    check_targets,
    format_table,
    load_verdict,
    ratio_summary,
    summary,
)
from benchmarks.workers import (  # noqa: E402
    ProcessSettings,
    Worker,
    machine_info,
    machine_load,
    source_revision,
)
from transformer.atomic import atomic_write_text  # noqa: E402


class CacheMismatchError(AssertionError):
    """Our cached greedy output differs from the no-cache output: the cache is wrong."""


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


def _others(worker: Worker, own_cpu_seconds: float) -> float | None:
    return worker.others_cpu_percent(own_cpu_seconds)


def run_training(plan: Plan, workers: dict[str, Worker], bf16: bool, figures: dict, ratios: dict):
    """Item 1: training tokens/s of every engine, alternating engines round by round."""
    batch = random_batch(plan.train_batch, plan.train_length, plan.dims.vocab_size, seed=1)
    dtype = "bf16" if bf16 else "fp32"
    for worker in workers.values():
        worker.call("train", batch=batch, steps=plan.warmup_steps, bf16=bf16)
    seconds = {name: [] for name in workers}
    cpu = {name: [] for name in workers}
    others = {name: [] for name in workers}
    tokens = 0
    for _ in range(plan.train_rounds):
        for name, worker in workers.items():
            steps = worker.call("train", batch=batch, steps=plan.steps_per_round, bf16=bf16)
            tokens = steps[0]["tokens"]
            seconds[name].append(sorted(s["seconds"] for s in steps)[len(steps) // 2])
            cpu[name].append(sorted(s["cpu_seconds"] for s in steps)[len(steps) // 2])
            others[name].append(_others(worker, sum(s["cpu_seconds"] for s in steps)))
    for name in workers:
        figures[f"train_{dtype}_{name}"] = summary(
            [tokens / s for s in seconds[name]],
            "target tokens/s",
            others_cpu_percent=_median_or_none(others[name]),
        )
    suffix = "" if not bf16 else "_bf16"
    for peer in ("torch_nn", "hf"):
        if peer in workers:
            ratios[f"train_vs_{peer}{suffix}"] = ratio_summary(seconds[peer], seconds["ours"])
            ratios[f"train_vs_{peer}{suffix}_cputime"] = ratio_summary(cpu[peer], cpu["ours"])


def _median_or_none(values: list) -> float | None:
    values = sorted(v for v in values if v is not None)
    return values[len(values) // 2] if values else None


def check_cache_equality(cached: list[list[int]], uncached: list[list[int]]) -> dict:
    """Assert that cached and no-cache greedy outputs are equal token for token.

    Raises:
        CacheMismatchError: naming the first sentence and position that differ.
    """
    if len(cached) != len(uncached):
        raise CacheMismatchError(f"{len(cached)} cached vs {len(uncached)} no-cache outputs")
    for i, (a, b) in enumerate(zip(cached, uncached, strict=True)):
        if a != b:
            j = next(
                (k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)),
            )
            raise CacheMismatchError(
                f"cached greedy differs from no-cache greedy: sentence {i}, position {j} "
                f"(cached {a[j : j + 5]}..., no-cache {b[j : j + 5]}...): "
                "the decoder cache is wrong"
            )
    return {"equal": True, "sentences": len(cached), "tokens": sum(len(a) for a in cached)}


def run_decoding(plan: Plan, workers: dict[str, Worker], figures: dict, ratios: dict) -> dict:
    """Item 2: greedy and beam sentences/s, ours vs HF vs no-cache, plus the cache check."""
    src = random_sources(plan.decode_batch, plan.decode_src_length, plan.dims.vocab_size, seed=2)
    k = plan.beam_size
    calls = [("ours_greedy", "ours", {}), ("ours_greedy_nocache", "ours", {"cache": False})]
    if "hf" in workers:
        calls.append(("hf_greedy", "hf", {}))
    calls.append((f"ours_beam{k}", "ours", {"beam_size": k}))
    if "hf" in workers:
        calls.append((f"hf_beam{k}", "hf", {"beam_size": k}))
    for _, engine, kwargs in calls:  # warm-up
        workers[engine].call("decode", src=src, length=min(5, plan.decode_length), **kwargs)
    seconds = {name: [] for name, _, _ in calls}
    cpu = {name: [] for name, _, _ in calls}
    others = {name: [] for name, _, _ in calls}
    check = None
    for _ in range(plan.decode_rounds):
        outputs = {}
        for name, engine, kwargs in calls:
            result = workers[engine].call("decode", src=src, length=plan.decode_length, **kwargs)
            seconds[name].append(result["seconds"])
            cpu[name].append(result["cpu_seconds"])
            others[name].append(_others(workers[engine], result["cpu_seconds"]))
            outputs[name] = result["tokens"]
        check = check_cache_equality(outputs["ours_greedy"], outputs["ours_greedy_nocache"])
    for name, _, _ in calls:
        figures[f"decode_{name}"] = summary(
            [len(src) / s for s in seconds[name]],
            f"sentences/s ({plan.decode_length} tok)",
            others_cpu_percent=_median_or_none(others[name]),
        )
    ratios["greedy_vs_nocache"] = ratio_summary(
        seconds["ours_greedy_nocache"], seconds["ours_greedy"]
    )
    if "hf" in workers:
        ratios["greedy_vs_hf"] = ratio_summary(seconds["hf_greedy"], seconds["ours_greedy"])
        ratios[f"beam{k}_vs_hf"] = ratio_summary(seconds[f"hf_beam{k}"], seconds[f"ours_beam{k}"])
        ratios["greedy_vs_hf_cputime"] = ratio_summary(cpu["hf_greedy"], cpu["ours_greedy"])
        ratios[f"beam{k}_vs_hf_cputime"] = ratio_summary(cpu[f"hf_beam{k}"], cpu[f"ours_beam{k}"])
    return {**check, "rounds": plan.decode_rounds}


def run_decode_scaling(plan: Plan, ours: Worker, figures: dict, ratios: dict) -> None:
    """Item 3a: our greedy decoding time per output length, lengths alternating by round."""
    src = random_sources(plan.scaling_decode_batch, plan.decode_src_length, plan.dims.vocab_size, 3)
    lengths = plan.scaling_decode_lengths
    ours.call("decode", src=src, length=lengths[0])  # warm-up
    seconds = {n: [] for n in lengths}
    cpu = {n: [] for n in lengths}
    others = {n: [] for n in lengths}
    for _ in range(plan.scaling_decode_rounds):
        for n in lengths:
            result = ours.call("decode", src=src, length=n)
            seconds[n].append(result["seconds"])
            cpu[n].append(result["cpu_seconds"])
            others[n].append(_others(ours, result["cpu_seconds"]))
    for n in lengths:
        figures[f"scaling_decode_{n}_tokens"] = summary(
            seconds[n], "seconds (ours, greedy)", others_cpu_percent=_median_or_none(others[n])
        )
    first, last = lengths[0], lengths[-1]
    ratios[f"decode_{last}_over_{first}"] = ratio_summary(seconds[last], seconds[first])
    ratios[f"decode_{last}_over_{first}_cputime"] = ratio_summary(cpu[last], cpu[first])


def run_train_scaling(plan: Plan, settings: ProcessSettings, figures: dict) -> None:
    """Item 3b: our training step time and peak memory per sequence length (fresh process;
    lengths in increasing order, so each peak is not hidden by an earlier, larger one)."""
    if not plan.scaling_train_lengths:
        return
    with Worker("ours", plan.dims, settings) as ours:
        for length in plan.scaling_train_lengths:
            batch = random_batch(plan.scaling_train_batch, length, plan.dims.vocab_size, seed=4)
            ours.call("train", batch=batch, steps=1)  # warm-up
            result = ours.call("train_peak_memory", batch=batch, steps=plan.scaling_train_steps)
            steps = result["steps"]
            others = _others(ours, sum(s["cpu_seconds"] for s in steps))
            figures[f"scaling_train_step_len{length}"] = summary(
                [s["seconds"] for s in steps],
                f"seconds/step (B={plan.scaling_train_batch})",
                others_cpu_percent=others,
            )
            peak = result["peak_mib"]
            if peak is not None:
                figures[f"scaling_train_peak_rss_len{length}"] = summary(
                    [peak], "MiB (process RSS)"
                )


def run_cpu_benchmark(plan: Plan, settings: ProcessSettings, with_hf: bool) -> dict:
    """Items 1-3 on the CPU; returns the report without machine facts."""
    figures: dict = {}
    ratio_stats: dict = {}
    engines = [e for e in plan.engines if with_hf or e != "hf"]
    workers = {name: Worker(name, plan.dims, settings) for name in engines}
    try:
        info = {name: w.info for name, w in workers.items()}
        for dtype in plan.train_dtypes:
            print(f"[benchmark] training, {dtype} ...", flush=True)
            run_training(plan, workers, dtype == "bf16", figures, ratio_stats)
        if "torch_nn" in workers:
            workers.pop("torch_nn").close()
        print("[benchmark] decoding ...", flush=True)
        cache_check = run_decoding(plan, workers, figures, ratio_stats)
        print("[benchmark] decode scaling ...", flush=True)
        run_decode_scaling(plan, workers["ours"], figures, ratio_stats)
    finally:
        for worker in workers.values():
            worker.close()
    print("[benchmark] training scaling ...", flush=True)
    run_train_scaling(plan, settings, figures)
    return {
        "engines": info,
        "figures": figures,
        "ratio_stats": ratio_stats,
        "cache_check": cache_check,
    }


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
