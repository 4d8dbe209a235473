"""`transformer-plot`: draw a run's training curves from its metrics.jsonl.

    transformer-plot checkpoints/multi30k_en-de [--output curves.png]
    transformer-plot copies/metrics.jsonl   # the file itself: training_curves.png beside it

Reads RUN_DIR/metrics.jsonl, written by transformer-train (or the metrics file named instead of
a run directory), and draws against the update step
the training (and validation) loss, the validation BLEU, the learning rate and the target
tokens per second, as the four panels of one image (`transformer.evaluate.training_curves`);
a panel without data says so. The image goes to RUN_DIR/training_curves.png unless `--output`
names another file, whose suffix is the format (png, svg, pdf, ...); it is written atomically
(`transformer.atomic`), its directory must exist, and it may not be metrics.jsonl itself. A
damaged metrics.jsonl (an empty line, a line that is not a JSON record) is named with its line
number; a last line that training is still writing is left out. Drawing needs matplotlib
(`pip install -e '.[viz]'` in a clone). Exit status: the rule of `transformer.cli.common` (0 ok,
2 wrong command line, 1 the work could not be done, 130 interrupted).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transformer.cli.common import UsageError, check_output_path, run
from transformer.cli.values import file_name
from transformer.evaluate.training_curves import (
    draw_training_curves,
    output_format,
    read_metrics,
)

DEFAULT_OUTPUT = "training_curves.png"


def build_parser() -> argparse.ArgumentParser:
    """The command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="transformer-plot",
        description="Draw a run's training curves (loss, BLEU, learning rate, tokens/s) "
        "from its metrics.jsonl.",
    )
    parser.add_argument(
        "run_dir",
        type=file_name,
        metavar="RUN_DIR",
        help="run directory (train.output_dir), or a metrics.jsonl file itself",
    )
    parser.add_argument(
        "--output",
        type=file_name,
        help=f"image to write; its suffix is the format (default: RUN_DIR/{DEFAULT_OUTPUT})",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run transformer-plot; returns the exit status.

    Returns:
        The exit status, by the rule of `transformer.cli.common`: 0 on success; 2 for a wrong
        command line (an --output format matplotlib cannot write); 1 after a one-line
        `transformer-plot: error: ...` when the work cannot be done (RUN_DIR missing or not a
        directory, no RUN_DIR/metrics.jsonl, an empty or malformed line in it, named with its
        number, a file without records, matplotlib missing, an output whose directory does
        not exist or that is metrics.jsonl itself).
    """
    return run(build_parser(), _plot, argv)


def _plot(args: argparse.Namespace) -> None:
    """Check the paths, read the records and draw them."""
    run_dir = Path(args.run_dir)
    if run_dir.is_file() and run_dir.suffix == ".jsonl":  # the metrics file itself
        run_dir, metrics = run_dir.parent, run_dir
    elif not run_dir.exists():
        raise ValueError(f"{run_dir}: no such run directory")
    elif not run_dir.is_dir():
        raise ValueError(
            f"{run_dir} is neither a directory nor a .jsonl file; give a run directory "
            "(train.output_dir) or its metrics.jsonl"
        )
    else:
        metrics = run_dir / "metrics.jsonl"
    if metrics.exists() and not metrics.is_file():
        raise ValueError(f"{metrics} is not a file (training writes its records there)")
    if not metrics.is_file():
        raise ValueError(
            f"{run_dir} has no metrics.jsonl (is it a run directory? training writes its first "
            "record after train.log_interval_steps updates)"
        )
    output = Path(args.output) if args.output is not None else run_dir / DEFAULT_OUTPUT
    try:
        output_format(output)
    except ImportError as error:  # says how to install matplotlib
        raise ValueError(str(error)) from None
    except ValueError as error:
        raise UsageError(f"--output {error}") from None
    check_output_path(output, [metrics], "--output")
    records = read_metrics(metrics)
    draw_training_curves(records, output, title=str(args.run_dir))
    noun = "record" if len(records) == 1 else "records"
    print(f"wrote {output} ({len(records)} {noun} of {metrics})")


if __name__ == "__main__":
    sys.exit(main())
