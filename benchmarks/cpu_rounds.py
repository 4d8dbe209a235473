"""The CPU measurements of `benchmarks/benchmark.py` (items 1-3), engines alternating by round.

Each engine runs in its own worker process (`benchmarks/workers.py`); every timed call records
the machine load beside it, and every ratio is the median of the per-round ratios
(`benchmarks/report.py`).
"""

from __future__ import annotations

from benchmarks.engines import random_batch, random_sources
from benchmarks.plan import Plan
from benchmarks.report import ratio_summary, summary
from benchmarks.workers import ProcessSettings, Worker


class CacheMismatchError(AssertionError):
    """Our cached greedy output differs from the no-cache output: the cache is wrong."""


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
