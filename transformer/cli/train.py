"""`transformer-train`: train a Transformer from a YAML config (section 5 of the paper).

Usage:
    transformer-train --config configs/tiny.yaml [train.max_steps=1000 model.dropout=0.3 ...]
    python -m transformer.train --config configs/base.yaml
    torchrun --nproc_per_node 8 -m transformer.train --config configs/base.yaml

Rerunning the same command continues from `checkpoint_last.pt` of `train.output_dir`;
`--no-resume` starts from scratch in the same directory instead.

Exit status: 0 when training finished, 1 on a non-finite loss, 2 on a configuration error.
"""

from __future__ import annotations

import argparse
import gc
import sys

from transformer.config import load_config
from transformer.train.distributed import init_distributed, shutdown
from transformer.train.trainer import NonFiniteLossError, Trainer


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="transformer-train",
        description="Train a Transformer (Vaswani et al., 2017) from a YAML config.",
    )
    parser.add_argument("--config", required=True, help="YAML config file (see configs/)")
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
    """Run `transformer-train`; returns the exit status (see module doc)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, args.overrides)
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    try:
        context = init_distributed(config.train.device)
    except ValueError as error:
        parser.error(str(error))
    try:
        try:
            trainer = Trainer(config, context, resume=args.resume)
        except (FileNotFoundError, ValueError) as error:
            print(f"transformer-train: error: {error}", file=sys.stderr)
            return 2
        try:
            trainer.train()
        finally:
            # Release the DistributedDataParallel wrapper (its reducer holds the process
            # group) before `shutdown` destroys the group, not at interpreter exit.
            del trainer
            gc.collect()
    except NonFiniteLossError as error:
        print(f"transformer-train: error: {error}", file=sys.stderr)
        return 1
    finally:
        shutdown(context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
