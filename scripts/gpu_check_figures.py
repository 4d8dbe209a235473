"""The data and the arithmetic of `scripts/gpu_check.py` (standard library only, no torch).

- `data_folder`: the data of a run, a folder of `gpu_check_data.sh` or `write_synthetic`'s
  made-up parallel text in the same layout, for a run without one;
- `training_figures`: steady-state tokens/s, MFU, batch-wait share and compile time from the
  per-batch timings that `gpu_check_worker.py train` writes;
- `junit_summary`, `trainer_records`: what pytest and the trainer's metrics.jsonl report;
- `summary`: the headline figures of a whole report, printed at the end of the check.

MFU = the model FLOPs of the timed updates (counted by `transformer.train.flops`, the
convention of the trainer's own MFU: real tokens, forward + backward, the causal mask not
discounted) / their time / the GPU's dense peak (`transformer.train.flops.PEAK_TFLOPS`).
"""

from __future__ import annotations

import itertools
import json
import random
import statistics
import xml.etree.ElementTree as ElementTree
from pathlib import Path

# An update slower than this many times the median of the steady window is a recompilation
# (or another stall): left out of the steady state and counted into `warmup_seconds`.
SLOW_UPDATE_FACTOR = 4.0
# The corpora of a data folder (see gpu_check_data.sh), each as PREFIX.en and PREFIX.de.
DATA_FILES = ("news/train", "multi30k/train", "wmt14-en-de/newstest2014")


def has_data(folder: Path) -> bool:
    """Whether `folder` holds every corpus of a data folder, both languages."""
    names = [f"{name}.{lang}" for name in DATA_FILES for lang in ("en", "de")]
    return all((folder / name).is_file() for name in names)


def data_folder(
    chosen: str | None, default: Path, work: Path, synthetic_pairs: tuple[int, int, int]
) -> tuple[Path, bool, dict[str, int]]:
    """The data of a run: a data folder, or synthetic text written for it.

    Args:
        chosen: `--data`: a folder, "synthetic", or None for `default` when it is complete.
        default: The folder `gpu_check_data.sh` makes (gpu_data/).
        work: Where synthetic text is written (`work/data`).
        synthetic_pairs: The `pairs` of `write_synthetic`.

    Returns:
        The folder, whether it holds real text, and the pairs of each of `DATA_FILES`.

    Raises:
        ValueError: naming a chosen folder that lacks a corpus.
    """
    folder = default if chosen is None else Path(chosen).resolve()
    real = chosen != "synthetic" and has_data(folder)
    if chosen not in (None, "synthetic") and not real:
        names = ", ".join(f"{name}.{{en,de}}" for name in DATA_FILES)
        raise ValueError(f"{folder} lacks one of {names} (see gpu_check_data.sh)")
    if not real:
        folder = work / "data"
        write_synthetic(folder, synthetic_pairs)
    pairs = {
        name: len((folder / f"{name}.en").read_text(encoding="utf-8").splitlines())
        for name in DATA_FILES
    }
    return folder, real, pairs


def write_synthetic(folder: Path, pairs: tuple[int, int, int], seed: int = 1) -> None:
    """Made-up parallel text in the data-folder layout.

    English is Zipf-distributed pseudo-words, with news-like (about 23 words) or caption-like
    (about 12 words) sentence lengths; German maps each word through a fixed dictionary and
    swaps some neighbouring words, so that a model can learn the mapping and when to stop.

    Args:
        folder: Where `news/`, `multi30k/` and `wmt14-en-de/` are written.
        pairs: News-like training pairs, caption-like pairs, test sentences.
        seed: Fixes the text.
    """
    rng = random.Random(seed)
    syllables = [c + v for c in "bdfghklmnprstvwz" for v in "aeiou"] + ["sch", "ei", "au"]

    def lexicon(count: int) -> list[str]:
        words: set[str] = set()
        while len(words) < count:
            words.add("".join(rng.choices(syllables, k=rng.randint(1, 4))))
        return sorted(words)

    english, german = lexicon(12000), lexicon(12000)
    rng.shuffle(german)
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) ** 1.1 for rank in range(12000)))

    def corpus(count: int, mu: float) -> tuple[list[str], list[str]]:
        src, tgt = [], []
        for _ in range(count):
            length = min(100, max(1, int(rng.lognormvariate(mu, 0.5))))
            ids = rng.choices(range(len(english)), cum_weights=cumulative, k=length)
            out = [german[i] for i in ids]
            for k in range(0, len(out) - 1, 3):
                if rng.random() < 0.3:
                    out[k], out[k + 1] = out[k + 1], out[k]
            src.append(" ".join(english[i] for i in ids).capitalize() + ".")
            tgt.append(" ".join(out).capitalize() + ".")
        return src, tgt

    for name, count, mu in zip(DATA_FILES, pairs, (3.0, 2.4, 3.0), strict=True):
        for lang, lines in zip(("en", "de"), corpus(count, mu), strict=True):
            path = folder / f"{name}.{lang}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_timings(path: Path) -> list[dict]:
    """The per-batch lines of a training run (from a line cut off by a kill on, nothing)."""
    if not path.is_file():
        return []
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return lines


def training_figures(timings: list[dict], warmup: int, peak_flops: float | None) -> dict:
    """Steady-state figures of a training run from its per-update timings.

    An update's time runs from the fetch of its batches to the fetch of the next update's (so
    the last update is not timed). The first `warmup` updates (start, and compilation with
    train.compile) and any update over `SLOW_UPDATE_FACTOR` x the median of the rest are left
    out; their time beyond that median is `warmup_seconds` (with train.compile: the compile
    time, recompilations included).

    Args:
        timings: `read_timings` of the run.
        warmup: Updates left out at the start.
        peak_flops: The GPU's peak FLOP/s for MFU (None: no MFU).
    """
    updates = [
        {**this, "seconds": following["t"] - this["t"]}
        for this, following in zip(timings, timings[1:], strict=False)
    ]
    figures: dict = {"updates_timed": len(updates), "warmup_updates": min(warmup, len(updates))}
    steady = updates[warmup:]
    if not steady:
        figures["note"] = "too few timed updates for a steady state"
        return figures
    median = statistics.median(u["seconds"] for u in steady)
    slow = [u for u in steady if u["seconds"] > SLOW_UPDATE_FACTOR * median]
    steady = [u for u in steady if u["seconds"] <= SLOW_UPDATE_FACTOR * median]
    seconds, flops = sum(u["seconds"] for u in steady), sum(u["flops"] for u in steady)
    tokens = sum(u["n_tgt"] for u in steady)
    figures.update(
        steady_updates=len(steady),
        slow_updates_left_out=len(slow),
        median_update_seconds=median,
        first_update_seconds=updates[0]["seconds"],
        warmup_seconds=sum(max(0.0, u["seconds"] - median) for u in updates[:warmup] + slow),
        target_tokens_per_update=tokens / len(steady),
        source_tokens_per_update=sum(u["n_src"] for u in steady) / len(steady),
        target_tokens_per_second=tokens / seconds,
        batch_wait_share=sum(u["wait"] for u in steady) / seconds,
        model_tflops_per_second=flops / seconds / 1e12,
    )
    if peak_flops:
        figures["mfu"] = flops / seconds / peak_flops
    return figures


def trainer_records(run_dir: Path, warmup: int) -> dict:
    """Medians of the trainer's own metrics.jsonl records after the warm-up (tokens/s, and MFU
    where the records carry it), to set beside `training_figures`."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return {}
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut off by a kill
            continue
        if record.get("type") == "train" and record.get("step", 0) > warmup:
            records.append(record)
    out: dict = {"records": len(records)}
    for key in ("tokens_per_second", "mfu"):
        values = [r[key] for r in records if isinstance(r.get(key), (int, float))]
        if values:
            out[f"median_{key}"] = statistics.median(values)
    return out


def gpu_test_files(tests: Path) -> list[str]:
    """The test files that hold GPU tests (`pytest.mark.gpu`), relative to the checkout.

    Running only these keeps test modules that import optional packages at module level
    (tests/data/test_corpus.py imports `datasets`) away from a machine that lacks them.
    """
    return [
        str(path.relative_to(tests.parent))
        for path in sorted(tests.rglob("test_*.py"))
        if "pytest.mark.gpu" in path.read_text(encoding="utf-8")
    ]


def junit_summary(path: Path) -> dict:
    """Counts and per-test outcomes from pytest's `--junitxml` report ({} without one)."""
    if not path.is_file():
        return {}
    root = ElementTree.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    outcomes = {}
    for case in suite.iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = kinds[0] if kinds else "passed"
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    return {**counts, "outcomes": outcomes}


def summary(report: dict) -> dict:
    """The headline figures as one flat mapping (also printed at the end)."""
    out = {}
    for key, entry in report["steps"].items():
        out[f"{key}.status"] = entry["status"]
        result = entry.get("result") or {}
        steady = result.get("steady_state") or {}
        for name in ("target_tokens_per_second", "mfu", "batch_wait_share", "warmup_seconds"):
            if name in steady:
                out[f"{key}.{name}"] = round(steady[name], 4)
        if "peak_memory_allocated_gib" in result:
            out[f"{key}.peak_memory_gib"] = round(result["peak_memory_allocated_gib"], 2)
        for precision, decoded in (result.get("by_precision") or {}).items():
            for name in ("sentences_per_second", "target_tokens_per_second", "sacrebleu"):
                if name in decoded:
                    out[f"{key}.{precision}.{name}"] = round(decoded[name], 2)
        for name in ("bit_identical", "process_group", "gpu", "torch", "cuda_runtime"):
            if name in result:
                out[f"{key}.{name}"] = result[name]
        if "tests" in result:
            out[f"{key}.tests"] = f"{result['tests']} run, {result['failures']} failed"
    return out
