"""`transformer-prepare`: prepare a training job's data ahead of time (like `fairseq-preprocess`).

Usage:
    transformer-prepare --config configs/base.yaml [data.vocab_size=32000 ...]

Reads the corpora of the config's `data:` section, trains (or reuses) the SentencePiece model
in `train.output_dir`, encodes, filters and caches the token ids there (with `data.bpe_dropout`,
also the BPE-dropout samples of every training word): the work `transformer-train` otherwise
does at its start. A progress bar per stage (on a terminal) and
a summary: pairs kept and dropped by reason, tokens, and the time and peak memory of each
stage (`--json FILE` writes the same figures as JSON). Run it before a torchrun job, as
`scripts/reproduce_wmt14.sh` does: then no process of the job waits on a long preparation,
and a data problem shows up before any GPU is taken. `transformer-train` reuses what it finds
(the cache is keyed by the corpus files and the SentencePiece model).

Exit status: the rule of `transformer.cli.common`: 0 when the data are prepared, 2 for a wrong
command line or config, 1 when a corpus is missing or unreadable or a split is empty after
filtering, 130 after Ctrl-C and 143 after SIGTERM, as `transformer-train` (what was being written
is removed; what was finished is kept and found by the next run).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from transformer.atomic import atomic_write_text
from transformer.cli.common import UsageError, check_output_path, run
from transformer.cli.values import file_name
from transformer.config import load_config
from transformer.data.corpus import resolve_prefix
from transformer.data.hf_corpus import HF_PREFIX
from transformer.data.prepare import prepare_data
from transformer.data.stages import peak_mib
from transformer.train.run_directory import RunDirectory


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="transformer-prepare",
        description="Prepare the data of a training config: SentencePiece model, encoded and "
        "filtered corpora (and BPE-dropout's samples with data.bpe_dropout), cached in "
        "train.output_dir.",
    )
    parser.add_argument(
        "--config", required=True, type=file_name, help="YAML config file (see configs/)"
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="SECTION.KEY=VALUE",
        help="dotted overrides of config keys, e.g. data.vocab_size=32000 (the same as for "
        "transformer-train, so that it finds what this prepares)",
    )
    parser.add_argument(
        "--json", type=file_name, metavar="FILE", help="also write the summary to FILE as JSON"
    )
    # Overrides may come before, between or after the options (`--no-resume` last).
    parser.parse_args = parser.parse_intermixed_args
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `transformer-prepare`; returns the exit status (see the module docstring)."""
    return run(build_parser(), _prepare, argv)  # SIGTERM as Ctrl-C, 143 (cli/common.run)


def _prepare(args: argparse.Namespace) -> None:
    """Load the config, prepare its data in the run directory, print a summary."""
    try:
        config = load_config(args.config, args.overrides)
    except (FileNotFoundError, ValueError) as error:
        raise UsageError(str(error)) from None
    run_dir = RunDirectory(config.train.output_dir)
    if args.json:  # before any work; the summary may go into the run directory it creates
        _check_summary_path(args.json, args.config, config, run_dir.path)
    start = time.perf_counter()
    with run_dir.removed_if_left_empty():  # missing or empty corpora, Ctrl-C
        prepared = prepare_data(config.data, run_dir.path, train=True, log=print)
    summary = _summary(prepared, time.perf_counter() - start)
    src, tgt = config.data.source_lang, config.data.target_lang
    print(f"prepared the data in {run_dir.path} in {summary['seconds']:.1f} s:")
    for name, split in summary["splits"].items():
        print(
            f"  {name}: {split['kept']:,} of {split['pairs']:,} pairs kept, "
            f"{split['src_tokens']:,} {src} + {split['tgt_tokens']:,} {tgt} tokens; "
            f"{split['report']}"
        )
    for stage in prepared.stages:
        print(f"  {stage}")
    data_dir = os.environ.get("TRANSFORMER_DATA_DIR")
    command = ["transformer-train", "--config", args.config, *args.overrides]
    prefix = f"TRANSFORMER_DATA_DIR={shlex.quote(data_dir)} " if data_dir else ""
    print(f"train with: {prefix}{shlex.join(command)}")
    if args.json:
        atomic_write_text(args.json, json.dumps(summary, indent=1) + "\n")


def _check_summary_path(path: str, config_path: str, config, run_dir: Path) -> None:
    """Refuse a `--json` file that would replace an input: the config, a corpus file, a file
    of the run directory (model, checkpoints, ...) or anything in the cache."""
    data = config.data
    inputs: list = [config_path, *run_dir.glob("spm*"), *run_dir.glob("*.pt")]
    inputs += [run_dir / "config.yaml", run_dir / "metrics.jsonl"]
    for spec in (data.train, data.valid, data.test):
        if spec and not spec.startswith(HF_PREFIX):
            prefix = resolve_prefix(spec)
            inputs += [
                prefix.parent / f"{prefix.name}.{lang}"
                for lang in (data.source_lang, data.target_lang)
            ]
    cache = data.cache_directory(run_dir)
    in_run_dir = Path(path).resolve().parent == run_dir.resolve()
    check_output_path(path, inputs, "--json", creates_directory=in_run_dir)  # ValueError: 1
    if cache.resolve() in Path(path).resolve().parents:
        raise ValueError(f"--json {path} is inside the cache {cache}; give another file")


def _summary(prepared, seconds: float) -> dict:
    """The figures of the summary: splits, stages, seconds, peak memory."""
    splits = {}
    for name, data, report in (
        ("train", prepared.train, prepared.train_report),
        ("valid", prepared.valid, prepared.valid_report),
    ):
        if data is not None:
            splits[name] = {
                "pairs": report.total,
                "kept": len(data),
                "empty": report.empty,
                "too_long": report.too_long,
                "bad_ratio": report.bad_ratio,
                "src_tokens": int(data.src_lengths.sum(dtype=np.int64)),
                "tgt_tokens": int(data.tgt_lengths.sum(dtype=np.int64)),
                "report": str(report),
            }
    stages = [dataclasses.asdict(stage) for stage in prepared.stages]
    # The stages reset the peak as they start: the process's peak is the largest of theirs
    # and of what came after the last one (all of it when nothing had to be done).
    peak = max([stage["peak_mib"] for stage in stages] + [peak_mib()])
    return {"seconds": seconds, "peak_mib": peak, "splits": splits, "stages": stages}


if __name__ == "__main__":
    sys.exit(main())
