"""`transformer-prepare`: prepare a training job's data ahead of time (like `fairseq-preprocess`).

Usage:
    transformer-prepare --config configs/base.yaml [data.vocab_size=32000 ...]

Reads the corpora of the config's `data:` section, trains (or reuses) the SentencePiece model
in `train.output_dir`, encodes, filters and caches the token ids there: the work
`transformer-train` otherwise does at its start. Run it before a torchrun job, as
`scripts/reproduce_wmt14.sh` does: then no process of the job waits on a long preparation,
and a data problem shows up before any GPU is taken. `transformer-train` reuses what it finds
(the cache is keyed by the corpus files and the SentencePiece model).

Exit status: the rule of `transformer.cli.common`: 0 when the data are prepared, 2 for a wrong
command line or config, 1 when a corpus is missing or unreadable or a split is empty after
filtering, 130 after Ctrl-C (files being written are left as they were).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

from transformer.cli.common import UsageError, file_name, run
from transformer.config import load_config
from transformer.data.prepare import prepare_data
from transformer.train.run_directory import RunDirectory


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="transformer-prepare",
        description="Prepare the data of a training config: SentencePiece model, encoded and "
        "filtered corpora, cached in train.output_dir.",
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
    # Overrides may come before, between or after the options (`--no-resume` last).
    parser.parse_args = parser.parse_intermixed_args
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `transformer-prepare`; returns the exit status (see the module docstring)."""
    return run(build_parser(), _prepare, argv)


def _prepare(args: argparse.Namespace) -> None:
    """Load the config, prepare its data in the run directory, print a summary."""
    try:
        config = load_config(args.config, args.overrides)
    except (FileNotFoundError, ValueError) as error:
        raise UsageError(str(error)) from None
    run_dir = RunDirectory(config.train.output_dir)
    run_dir.create()
    start = time.perf_counter()
    prepared = prepare_data(config.data, run_dir.path, train=True, log=print)
    seconds = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    splits = [f"train {len(prepared.train):,} pairs"]
    if prepared.valid is not None:
        splits.append(f"valid {len(prepared.valid):,} pairs")
    print(
        f"prepared {', '.join(splits)} in {run_dir.path} in {seconds:.1f} s "
        f"(peak memory {peak_mib:,.0f} MiB); train with: transformer-train --config "
        f"{args.config} {' '.join(args.overrides)}".rstrip()
    )


if __name__ == "__main__":
    sys.exit(main())
