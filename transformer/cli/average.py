"""`transformer-average`: average the weights of several checkpoints (section 6.1 of the paper).

Usage:
    transformer-average --inputs A.pt B.pt C.pt --output averaged.pt
    transformer-average --last 5 --dir checkpoints/wmt14_en-de_base --output averaged.pt

What averaging does is `transformer.train.average.average_checkpoints`. The output is written
atomically (`transformer.atomic`). Exit status: the rule of `transformer.cli.common` (0 ok,
2 wrong command line, 1 the work could not be done, 130 interrupted). Names of one file
(`checkpoint_last.pt` is a hard link of the newest numbered checkpoint) are averaged once.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from transformer.checkpoint import save_checkpoint
from transformer.cli.common import UsageError, check_output_path, run
from transformer.cli.values import file_name, integer
from transformer.train.average import average_checkpoints, distinct_files, last_checkpoints

PROG = "transformer-average"


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Average the weights of checkpoints (Vaswani et al., 2017, section 6.1).",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--inputs", nargs="+", type=file_name, metavar="CKPT", help="checkpoints to average"
    )
    source.add_argument(
        "--last", type=integer, metavar="N", help="the N newest checkpoints of --dir"
    )
    parser.add_argument(
        "--dir", type=file_name, metavar="RUN_DIR", help="run directory (with --last)"
    )
    parser.add_argument(
        "--output", required=True, type=file_name, help="where to write the averaged checkpoint"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `transformer-average`; returns the exit status.

    Returns:
        The exit status, by the rule of `transformer.cli.common`: 0 on success; 2 for a wrong
        command line (`--last` without `--dir` or below 1, `--dir` with `--inputs`, an
        `--output` name that training writes); 1 after a one-line error when the work cannot
        be done (a missing or bad checkpoint, checkpoints that do not match, too few
        checkpoints in `--dir`, an `--output` that is a directory, an input, in a directory
        that does not exist, or cannot be written).
    """
    return run(build_parser(), _average, argv)


def _average(args: argparse.Namespace) -> None:
    """Average the checkpoints `args` names and write the result."""
    if args.last is not None and args.dir is None:
        raise UsageError("--last needs --dir RUN_DIR")
    if args.inputs and args.dir is not None:
        raise UsageError("--dir goes with --last; --inputs names the checkpoints itself")
    if args.last is not None and args.last < 1:
        raise UsageError(f"--last ({args.last}) must be at least 1")
    output = Path(args.output)
    if output.is_dir():
        raise ValueError(f"--output {output} is a directory; give a file name such as avg.pt")
    paths = args.inputs or last_checkpoints(args.dir, args.last)
    try:
        paths, repeats = distinct_files(paths)
    except FileNotFoundError as error:
        raise ValueError(f"checkpoint not found: {error.filename}") from None
    for repeat, kept in repeats:
        print(
            f"{PROG}: warning: {repeat} is the same file as {kept}: averaged once", file=sys.stderr
        )
    check_output_path(output, list(paths), "--output")
    written = {output.name, Path(os.path.realpath(output)).name}  # also through a link
    if any(re.fullmatch(r"checkpoint_(last|\d+)\.pt", name) for name in written):
        raise UsageError(
            f"--output {output}: {output.name} is a name training writes and resumes from; "
            "give another name such as checkpoint_avg5.pt"
        )
    averaged = average_checkpoints(paths)
    try:
        save_checkpoint(averaged, output)
    except OSError as error:
        raise ValueError(f"--output {output}: cannot write the checkpoint: {error}") from error
    print(f"averaged {len(paths)} checkpoint{'s' if len(paths) > 1 else ''} -> {args.output}")


if __name__ == "__main__":
    sys.exit(main())
