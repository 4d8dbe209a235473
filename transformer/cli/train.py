"""`transformer-train`: train a Transformer from a YAML config (section 5 of the paper).

Usage:
    transformer-train --config configs/tiny.yaml [train.max_steps=1000 model.dropout=0.3 ...]
    python -m transformer.train --config configs/base.yaml
    torchrun --nproc_per_node 8 -m transformer.train --config configs/base.yaml

Rerunning the same command continues from `checkpoint_last.pt` of `train.output_dir`;
`--no-resume` starts from scratch in the same directory instead.

Exit status: the rule of `transformer.cli.common`: 0 when training finished, 2 for a wrong
command line or config, 1 when training could not run or stopped on a non-finite loss, 130
after Ctrl-C (the last checkpoint is kept; rerun to resume).
"""

from __future__ import annotations

import argparse
import gc
import sys

from transformer.cli.common import UsageError, file_name, run
from transformer.config import load_config
from transformer.train.distributed import init_distributed, shutdown
from transformer.train.trainer import Trainer


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="transformer-train",
        description="Train a Transformer (Vaswani et al., 2017) from a YAML config.",
    )
    parser.add_argument(
        "--config", required=True, type=file_name, help="YAML config file (see configs/)"
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="SECTION.KEY=VALUE",
        help="dotted overrides of config keys, e.g. train.max_steps=1000 model.dropout=0.3",
    )
    parser.add_argument(
        "--no-resume",
        "--fresh",
        dest="resume",
        action="store_false",
        help="start from scratch even if the run directory holds checkpoint_last.pt",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `transformer-train`; returns the exit status.

    Returns:
        The exit status, by the rule of `transformer.cli.common`: 0 when training finished;
        2 for a wrong command line (a missing or invalid config file, an unknown key, a bad
        override or value, an unknown or absent `train.device`); 1 after a one-line error when
        the work cannot be done (data or tokenizer problems while preparing, a checkpoint that
        cannot be resumed, a run directory that cannot be created, a non-finite loss).
    """
    return run(build_parser(), _train, argv)


def _train(args: argparse.Namespace) -> None:
    """Load the config, then train in this process (one of several under torchrun)."""
    try:
        config = load_config(args.config, args.overrides)
    except (FileNotFoundError, ValueError) as error:
        raise UsageError(str(error)) from None
    try:
        context = init_distributed(config.train.device)
    except ValueError as error:
        raise UsageError(str(error)) from None
    try:
        trainer = Trainer(config, context, resume=args.resume)
        try:
            trainer.train()
        finally:
            # Release the DistributedDataParallel wrapper (its reducer holds the process
            # group) before `shutdown` destroys the group, not at interpreter exit.
            del trainer
            gc.collect()
    except BaseException:
        # No closing barrier: the other processes may wait in a collective this one will
        # never join. Leave at once; `run` turns the error into a non-zero exit status.
        shutdown(context, failed=True)
        raise
    shutdown(context)


if __name__ == "__main__":
    sys.exit(main())
