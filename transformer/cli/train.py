"""`transformer-train`: train a Transformer from a YAML config (section 5 of the paper).

Usage:
    transformer-train --config configs/tiny.yaml [train.max_steps=1000 model.dropout=0.3 ...]
    python -m transformer.train --config configs/base.yaml
    torchrun --nproc_per_node 8 -m transformer.train --config configs/base.yaml

Rerunning the same command continues from `checkpoint_last.pt` of `train.output_dir`;
`--no-resume` starts from scratch in the same directory instead. `train.tensorboard=true` also
writes the metrics as TensorBoard events (`transformer.train.tensorboard_log`); without the
tensorboard package that is a one-line error before any work.

Ctrl-C or SIGTERM (a scheduler's stop) during training: the current update finishes,
`checkpoint_last.pt` is written, one line says how to resume (every rank of a torchrun job
stops after the same update); a second Ctrl-C aborts at once (`transformer.train.interrupt`).

Exit status: the rule of `transformer.cli.common`: 0 when training finished, 2 for a wrong
command line or config, 1 when training could not run or stopped on a non-finite loss, 130
after Ctrl-C and 143 after SIGTERM (rerun to resume).
"""

from __future__ import annotations

import argparse
import gc
import sys

from tqdm import tqdm

from transformer.cli.common import UsageError, run
from transformer.cli.values import file_name
from transformer.config import Config, default_keys, format_config, load_config
from transformer.train.distributed import join_process_group, shutdown, torchrun_context
from transformer.train.run_data import prepare_run_data
from transformer.train.tensorboard_log import summary_writer_class
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
        "--print-config",
        action="store_true",
        help="print the resolved config as YAML (keys taken from defaults marked) and exit",
    )
    parser.add_argument(
        "--no-resume",
        "--fresh",
        dest="resume",
        action="store_false",
        help="start from scratch even if the run directory holds checkpoint_last.pt",
    )
    # Overrides may come before, between or after the options (`--no-resume` last).
    parser.parse_args = parser.parse_intermixed_args
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `transformer-train`; returns the exit status.

    Returns:
        The exit status, by the rule of `transformer.cli.common`: 0 when training finished;
        2 for a wrong command line (a missing or invalid config file, an unknown key, a bad
        override or value, an unknown or absent `train.device`); 1 after a one-line error when
        the work cannot be done (data or tokenizer problems while preparing, a checkpoint that
        cannot be resumed, a run directory that cannot be created, a non-finite loss,
        `train.tensorboard: true` without the tensorboard package, before any work).
    """
    return run(build_parser(), _train, argv)


def _train(args: argparse.Namespace) -> int | None:
    """Load the config, then train in this process (one of several under torchrun)."""
    try:
        config = load_config(args.config, args.overrides)
        defaults = default_keys(args.config, args.overrides)
    except (FileNotFoundError, ValueError) as error:
        raise UsageError(str(error)) from None
    if args.print_config:
        notes = dict(_SET_BY_TRAINING)
        if not config.data.shared_vocab:  # two vocabularies: no shared embedding matrix
            notes["model.share_embeddings"] = "set by training: false (data.shared_vocab false)"
        print(format_config(config, defaults, notes), end="")
        return
    if config.train.tensorboard:  # before any work (every rank: none waits on a failed one)
        try:
            summary_writer_class()
        except ImportError as error:  # says how to install tensorboard
            raise ValueError(str(error)) from None
    try:
        context = torchrun_context(config.train.device)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if context.is_main:
        tqdm.write(_defaults_line(args.config, config, defaults))
    # The data first, then the process group: no collective waits on data preparation.
    log = tqdm.write if context.is_main else None
    prepared = prepare_run_data(config, context, log=log, replace_model=not args.resume)
    if context.is_main:
        for line in _replaced_vocab_sizes(config, defaults, prepared.tokenizer):
            tqdm.write(line)
    join_process_group(context)
    try:
        trainer = Trainer(config, context, resume=args.resume, prepared=prepared)
        try:
            state = trainer.train()
            # Stopped by Ctrl-C / SIGTERM after a checkpoint: 128 + the signal, or 1.
            status = trainer.signals.exit_status if state.stop_reason == "interrupted" else 0
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
    return status


# What --print-config says of the keys that training sets (train/trainer.py, model_config_for).
_SET_BY_TRAINING = {
    "model.vocab_size": "set by training: the trained SentencePiece model's size",
    "model.tgt_vocab_size": "set by training: the target model's size (data.shared_vocab false)",
}

# Not worth a mention: the special ids, and the vocabulary size that the trained SentencePiece
# model sets.
_UNREMARKABLE = ("vocab_size", "tgt_vocab_size", "pad_id", "unk_id", "bos_id", "eos_id")


def _replaced_vocab_sizes(config: Config, defaults: list[str], tokenizer) -> list[str]:
    """One line for each vocabulary size the config sets that the SentencePiece model(s)
    replace (`model_config_for`): training never uses them, so say so rather than drop them."""
    sizes = {"model.vocab_size": tokenizer.src_vocab_size}
    if not tokenizer.shared:
        sizes["model.tgt_vocab_size"] = tokenizer.tgt_vocab_size
    lines = []
    for name, size in sizes.items():
        given = getattr(config.model, name.split(".")[1])
        if name not in defaults and given is not None and given != size:
            lines.append(
                f"config {name}={given} is replaced by {size}, the size of the SentencePiece "
                "model (the vocabulary to train is data.vocab_size)"
            )
    return lines


def _defaults_line(path: str, config: Config, defaults: list[str]) -> str:
    """One line naming the model and data keys the run takes from defaults, with values."""
    taken = []
    for name in defaults:
        section, key = name.split(".")
        if section in ("model", "data") and key not in _UNREMARKABLE:
            taken.append(f"{name}={getattr(getattr(config, section), key)!r}")
    listed = ", ".join(taken) if taken else "none"
    return (
        f"config {path}: model and data keys from defaults: {listed} (all keys: "
        "transformer-train --print-config ...)"
    )


if __name__ == "__main__":
    sys.exit(main())
