"""The data pipeline at WMT14 size (issue #14): preparation, collation and ranks sharing the cache.

    python -m benchmarks.prepare_scale [--corpus PREFIX ...] [--work-dir DIR] [--ranks 8]
    python benchmarks/prepare_scale.py --corpus /tmp/synth/train450k --json prepare_scale.json

For each corpus (PREFIX.en / PREFIX.de; default: synthetic ones of 450,000 and 4,500,000 pairs,
written by `benchmarks/make_corpus.py` into the work directory unless already there), with the
data section of `--config` (configs/base.yaml: 37,000 BPE pieces, max_len 256):

1. Preparation from nothing: `transformer-prepare --config CONFIG data.train=PREFIX
   data.valid=null train.output_dir=WORK/run-NAME` in a subprocess, the run directory removed
   first (the corpus files may still be in the page cache). Wall time, the peak resident
   memory of the process and its children (VmRSS polled every 20 ms: the process resets its
   own VmHWM per stage, so /usr/bin/time's figure would be wrong) and its per-stage table
   (`--json`). Then the same command again, everything cached (issue's target: under 15 s).
2. Collation rate: a fresh process pinned to one core, one thread, opens the prepared data
   (`prepare_data(build=False)`), plans epoch 1 with `BatchIterator` (the config's
   train.max_tokens; planning timed apart) and collates its batches, the whole epoch or until
   `--collate-seconds`: target tokens (with eos) per second, wall clock and CPU (target: over 1M/s).
3. Ranks sharing the cache: `--ranks` processes start at once, each opens the prepared data,
   collates its shard of epoch 1 (rank r of world_size ranks), then, while every rank is still
   alive, measures its data memory: anonymous memory gained since its imports (smaps_rollup:
   the SentencePiece model, its batch plan, each rank's own) plus the Pss of its mappings of
   files under the run directory's cache/ (smaps: a page that k ranks map counts 1/k in each).
   The sum over the ranks is compared with one process alone doing the same with world_size 1
   (its Pss is its Rss): the token arrays are memory-mapped, so eight ranks should add little
   (target: sum / one rank < 1.10); both parts are reported too.

The work directory keeps `run-NAME/` (removed and prepared again by each run) and the log and
`--json` file of each transformer-prepare run (`run-NAME.first.log`, `run-NAME.cached.json`).

Prints a table per corpus and, last, a Markdown summary for BENCHMARKS.md; `--json` writes every
figure, the command line and the machine's cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import from the repo root, not benchmarks/
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [str(_HERE.parent), *(p for p in sys.path if p != str(_HERE))]

from benchmarks import make_corpus  # noqa: E402
from benchmarks.prepare_scale_measures import (  # noqa: E402
    REPO,
    MeasureError,
    collation,
    run_prepare,
    shared_memory,
)
from transformer.atomic import atomic_write_text  # noqa: E402
from transformer.config import load_config  # noqa: E402

DEFAULT_PAIRS = (450_000, 4_500_000)
SET_HERE = ("data.train", "data.valid", "train.output_dir", "data.cache_dir")
TARGETS = {"cached_seconds": 15.0, "tgt_tokens_per_second": 1e6, "ranks_over_one": 1.10}


def measure(args, name: str, prefix: Path) -> dict:
    """Every figure of one corpus."""
    run_dir = args.work_dir / f"run-{name}"
    overrides = [f"data.train={prefix}", "data.valid=null", f"train.output_dir={run_dir}"]
    overrides += args.override
    if run_dir.exists():
        shutil.rmtree(run_dir)
    runs = {}
    for kind in ("first", "cached"):
        print(f"{name}: transformer-prepare ({kind}) ...", flush=True)
        files = [args.work_dir / f"run-{name}.{kind}.{suffix}" for suffix in ("json", "log")]
        runs[kind] = run_prepare(args.config, overrides, *files)
    print(f"{name}: collation ...", flush=True)
    collated = collation(args.config, overrides, args.collate_seconds)
    print(f"{name}: {args.ranks} ranks sharing the cache, then one alone ...", flush=True)
    shared = shared_memory(args.config, overrides, args.ranks)
    train = runs["first"]["summary"]["splits"]["train"]
    sides = {side: prefix.with_name(f"{prefix.name}.{side}").stat().st_size for side in args.sides}
    return {
        "name": name,
        "prefix": str(prefix),
        "bytes": sides,
        "pairs": train["pairs"],
        "kept": train["kept"],
        "prepare": runs,
        "collation": collated,
        "shared": shared,
    }


def print_corpus(result: dict, ranks: int) -> None:
    """A readable table of one corpus's figures."""
    first, cached = result["prepare"]["first"], result["prepare"]["cached"]
    c, s, mb = result["collation"], result["shared"], sum(result["bytes"].values()) / 1e6
    print(f"\n{result['name']} ({result['prefix']}, {mb:,.1f} MB): {result['pairs']:,} pairs")
    print(
        f"  preparation from nothing: {first['seconds']:.1f} s, peak {first['peak_mib']:,.0f} MiB"
    )
    print(f"    {'stage':<56} {'seconds':>8} {'peak MiB':>9}")
    for stage in first["summary"]["stages"]:
        print(f"    {stage['name']:<56} {stage['seconds']:>8.1f} {stage['peak_mib']:>9,.0f}")
    print(
        f"  again, all cached: {cached['seconds']:.1f} s, peak {cached['peak_mib']:,.0f} MiB "
        f"(target: under {TARGETS['cached_seconds']:g} s)"
    )
    print(
        f"  collation on one core: {c['tgt_tokens_per_second'] / 1e6:.2f}M target tokens/s, "
        f"{c['tgt_tokens_per_cpu_second'] / 1e6:.2f}M per CPU second (target: over 1M/s); "
        f"{c['tgt_tokens']:,} tokens, {c['batches']:,} of {c['epoch_batches']:,} batches in "
        f"{c['seconds']:.1f} s; planning the epoch {c['planning_seconds']:.2f} s"
    )
    print(
        f"  {ranks} ranks sharing the cache: {s['sum_data_mib']:,.1f} MiB of data memory in all, "
        f"one rank alone {s['alone_data_mib']:,.1f} MiB: x{s['ratio']:.3f} "
        f"(target: under {TARGETS['ranks_over_one']:.2f}); of which the cache's pages "
        f"{s['sum_cache_pss_mib']:,.1f} vs {s['alone_cache_pss_mib']:,.1f} MiB "
        f"(x{s['cache_ratio']:.3f}), anonymous {s['sum_anonymous_mib']:,.1f} vs "
        f"{s['alone_anonymous_mib']:,.1f} MiB"
    )
    columns = ("anon MiB", "cache Pss", "cache Rss", "RSS MiB", "tgt tokens")
    print(f"    {'rank':<6}" + "".join(f"{column:>12}" for column in columns))
    for rank in [*s["ranks"], {**s["alone"], "rank": "alone"}]:
        kib = (rank[key] / 1024 for key in ("anonymous_kib", "cache_pss_kib", "cache_rss_kib"))
        row = [*(f"{value:.1f}" for value in kib), f"{rank['rss_kib'] / 1024:.1f}"]
        print(
            f"    {rank['rank']!s:<6}"
            + "".join(f"{v:>12}" for v in row)
            + f"{rank['tgt_tokens']:>12,}"
        )


def markdown(report: dict) -> str:
    """The summary for BENCHMARKS.md: one row per corpus, then the stages of each."""
    overrides = "".join(f" {override}" for override in report["overrides"])
    lines = [
        f"`{' '.join(report['command'])}` ({report['cores']} cores; "
        f"{Path(report['config']).name}{overrides}):",
        "",
        "| corpus | pairs | prepare | peak RSS | again, cached | peak RSS "
        f"| collation, 1 core | planning | {report['ranks']} ranks / 1 rank |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["corpora"]:
        first, cached = r["prepare"]["first"], r["prepare"]["cached"]
        c, s = r["collation"], r["shared"]
        lines.append(
            f"| {r['name']} | {r['pairs']:,} "
            f"| {first['seconds']:.1f} s | {first['peak_mib']:,.0f} MiB "
            f"| {cached['seconds']:.1f} s | {cached['peak_mib']:,.0f} MiB "
            f"| {c['tgt_tokens_per_second'] / 1e6:.2f}M target tokens/s "
            f"| {c['planning_seconds']:.2f} s "
            f"| {s['ratio']:.3f} ({s['sum_data_mib']:,.0f} / {s['alone_data_mib']:,.0f} MiB; "
            f"cache pages {s['cache_ratio']:.3f}) |"
        )
    lines += ["", "| corpus | stage (first preparation) | seconds | peak MiB |"]
    lines.append("|---|---|---:|---:|")
    for r in report["corpora"]:
        for stage in r["prepare"]["first"]["summary"]["stages"]:
            figures = f"{stage['seconds']:.1f} | {stage['peak_mib']:,.0f}"
            lines.append(f"| {r['name']} | {stage['name']} | {figures} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus",
        nargs="+",
        metavar="PREFIX",
        help="PREFIX.en and PREFIX.de (default: synthetic corpora of 450,000 and 4,500,000 pairs)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path("/tmp/prepare_scale"),
        help="run directories, logs and generated corpora (default: %(default)s)",
    )
    parser.add_argument("--ranks", type=int, default=8, help="processes sharing the cache")
    parser.add_argument("--config", default=str(REPO / "configs" / "base.yaml"))
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="passed to transformer-prepare, e.g. data.vocab_size=8000",
    )
    parser.add_argument(
        "--collate-seconds",
        type=float,
        default=60.0,
        help="stop collating after this long, short of an epoch (default: 60)",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="write every figure to OUT")
    given = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(given)
    if args.ranks < 1:
        parser.error(f"--ranks ({args.ranks}) must be at least 1")
    if args.collate_seconds <= 0:
        parser.error(f"--collate-seconds ({args.collate_seconds:g}) must be positive")
    if args.json and not args.json.resolve().parent.is_dir():
        parser.error(f"--json {args.json}: the directory {args.json.parent} does not exist")
    for override in args.override:
        if override.split("=", 1)[0].strip() in SET_HERE:
            parser.error(f"--override {override}: {', '.join(SET_HERE)} are set by the benchmark")
    try:
        config = load_config(args.config, args.override)
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    args.config = str(Path(args.config).resolve())  # the workers run from the repo root
    args.sides = (config.data.source_lang, config.data.target_lang)
    for prefix in args.corpus or []:
        for side in args.sides:
            if not Path(f"{prefix}.{side}").is_file():
                parser.error(f"--corpus {prefix}: no file {prefix}.{side}")
    if not args.work_dir.resolve().parent.is_dir():
        parser.error(
            f"--work-dir {args.work_dir}: the directory {args.work_dir.parent} does not exist"
        )
    args.work_dir = args.work_dir.resolve()
    args.work_dir.mkdir(exist_ok=True)
    corpora = [Path(prefix).resolve() for prefix in args.corpus or []]
    for pairs in DEFAULT_PAIRS if not args.corpus else ():
        prefix = args.work_dir / f"synth{pairs}"
        if not all(prefix.with_name(f"{prefix.name}.{side}").is_file() for side in ("en", "de")):
            if make_corpus.main(["--pairs", str(pairs), "--output", str(prefix)]) != 0:
                return 1
        corpora.append(prefix)
    names = [
        prefix.name if [p.name for p in corpora].count(prefix.name) == 1 else f"{prefix.name}-{i}"
        for i, prefix in enumerate(corpora)
    ]
    report = {
        "command": ["python", "-m", "benchmarks.prepare_scale", *given],
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "config": args.config,
        "overrides": args.override,
        "ranks": args.ranks,
        "targets": TARGETS,
        "corpora": [],
    }
    for name, prefix in zip(names, corpora, strict=True):
        try:
            report["corpora"].append(measure(args, name, prefix))
        except MeasureError as error:
            print(f"{parser.prog}: error: {error}", file=sys.stderr)
            return 1
        print_corpus(report["corpora"][-1], args.ranks)
        if args.json:  # after every corpus: a long run keeps what it measured
            atomic_write_text(args.json, json.dumps(report, indent=1) + "\n")
    print("\n" + markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
