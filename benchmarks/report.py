"""Statistics, targets and the printed table of `benchmarks/benchmark.py`."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

# (ratio key, comparison, threshold, what it means): issue 6, "Targets".
TARGETS = (
    ("train_vs_hf", ">=", 1.0, "training tokens/s, ours / HF Marian, float32 (aim 1.3)"),
    ("train_vs_hf_bf16", ">=", 1.0, "training tokens/s, ours / HF Marian, bf16 autocast"),
    ("train_vs_torch_nn", ">=", 1.2, "training tokens/s, ours / torch.nn.Transformer, float32"),
    ("train_vs_torch_nn_bf16", ">=", 1.2, "training tokens/s, ours / torch.nn.Transformer, bf16"),
    ("greedy_vs_hf", ">=", 1.2, "greedy sentences/s, ours / HF generate"),
    ("beam4_vs_hf", ">=", 1.3, "beam-4 sentences/s, ours / HF generate"),
    ("decode_200_over_25", "<=", 9.0, "our greedy time for 200 tokens / for 25 tokens"),
    ("mfu_base_bf16", ">=", 0.40, "model FLOPs utilisation, base model, bf16 (CUDA only)"),
)

# A timed call during which other processes used more than this share of all cores is disturbed.
DISTURBED_OTHERS_PERCENT = 10.0


def summary(values: Sequence[float], unit: str, **extra) -> dict:
    """Median, min, max (and the raw values) of one figure."""
    values = [float(v) for v in values]
    return {
        "unit": unit,
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "values": values,
        **extra,
    }


def ratio_summary(numerators: Sequence[float], denominators: Sequence[float]) -> dict:
    """Per-round ratios numerator[r] / denominator[r], summarised (median of the ratios)."""
    ratios = [n / d for n, d in zip(numerators, denominators, strict=True)]
    return summary(ratios, "ratio")


def check_targets(ratios: dict[str, float], quick: bool) -> list[dict]:
    """Compare every measured ratio that has a target with it.

    Returns:
        One dict per target measured in this run: key, value, target, met, meaning.
    """
    results = []
    for key, comparison, threshold, meaning in TARGETS:
        if key not in ratios:
            continue
        value = ratios[key]
        met = value >= threshold if comparison == ">=" else value <= threshold
        results.append(
            {
                "key": key,
                "value": value,
                "target": f"{comparison} {threshold}",
                "met": met,
                "meaning": meaning,
                "note": "quick mode: smaller dimensions than the targets assume" if quick else "",
            }
        )
    return results


def load_verdict(start: dict, end: dict, figures: dict, cpu_count: int) -> dict:
    """Whether other processes disturbed the run, from the load at start/end and during calls."""
    during = [
        f["others_cpu_percent"] for f in figures.values() if f.get("others_cpu_percent") is not None
    ]
    reasons = []
    for label, load in (("start", start), ("end", end)):
        busy = load.get("cpu_busy_percent")
        if busy is not None and busy > DISTURBED_OTHERS_PERCENT:
            reasons.append(f"{busy:.0f}% of all CPUs busy at {label} (benchmark idle)")
    worst = max(during, default=None)
    if worst is not None and worst > DISTURBED_OTHERS_PERCENT:
        reasons.append(
            f"other processes used up to {worst:.0f}% of the {cpu_count} CPUs during timed calls "
            f"(median over figures {statistics.median(during):.0f}%)"
        )
    return {
        "start": start,
        "end": end,
        "others_cpu_percent_during_calls": {
            "median": statistics.median(during) if during else None,
            "max": worst,
        },
        "disturbed": bool(reasons),
        "note": "; ".join(reasons) if reasons else "no other busy process seen",
    }


def format_table(report: dict) -> str:
    """The terminal table: figures, then ratios with their targets, then the load verdict."""
    lines = [
        f"Benchmark ({report['mode']} mode, device {report['device']}): {report['dims_note']}",
        f"{'figure':<38} {'unit':<22} {'median':>11} {'min':>11} {'max':>11} {'others%':>8}",
    ]
    for name, f in report["figures"].items():
        others = f.get("others_cpu_percent")
        others_text = "" if others is None else f"{others:.0f}"
        lines.append(
            f"{name:<38} {f['unit']:<22} {f['median']:>11.4g} {f['min']:>11.4g} "
            f"{f['max']:>11.4g} {others_text:>8}"
        )
    lines.append("")
    lines.append(f"{'ratio (median of per-round ratios)':<38} {'median':>8} {'min':>8} {'max':>8}")
    targets = {t["key"]: t for t in report["targets"]}
    caveat = " (disturbed run: measure again)" if report["load"]["disturbed"] else ""
    for name, r in report["ratio_stats"].items():
        target = targets.get(name)
        verdict = ""
        if target:
            verdict = f"target {target['target']}: {'met' if target['met'] else 'MISSED'}{caveat}"
        lines.append(f"{name:<38} {r['median']:>8.3f} {r['min']:>8.3f} {r['max']:>8.3f}  {verdict}")
    load = report["load"]
    lines.append("")
    lines.append(f"machine load: {'DISTURBED' if load['disturbed'] else 'quiet'} ({load['note']})")
    lines.append(f"cache check: {report['cache_check']}")
    return "\n".join(lines)
