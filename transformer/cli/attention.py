"""`transformer-attention`: draw the attention weights a checkpoint uses on one sentence pair.

    transformer-attention --checkpoint checkpoints/multi30k_en-de/checkpoint_avg5.pt \\
        --src "A man is riding a horse." --kind cross --layer 2 --output horse.png

Translates the sentence (beam search; or force-decodes `--tgt`), collects the attention
weights of every layer and head (`transformer.evaluate.attention_maps`) and draws one layer as
heatmaps with the subword tokens as axis labels, one panel per head or their average, like
Figures 3 to 5 of the paper. `--json` writes the raw weights of all layers and heads for
notebooks. Layers and heads are 0-based. Drawing needs matplotlib (`pip install -e '.[viz]'`
in a clone); `--json` alone does not. `--checkpoint` may name a run directory: its
`checkpoint_best.pt`, else `checkpoint_last.pt` (named on stderr). Both files are written
atomically (`transformer.atomic`), and checked before the model loads: their directories must
exist, neither may be the checkpoint or the other, and `--output`'s suffix must be a format
matplotlib writes (png, svg, pdf, ...). Exit status: the rule of `transformer.cli.common` (0 ok,
2 wrong command line, 1 the work could not be done, 130 interrupted).
"""

from __future__ import annotations

import argparse
import json
import sys

from transformer.atomic import atomic_write_text
from transformer.cli.common import (
    UsageError,
    check_distinct_outputs,
    check_output_path,
    checkpoint_file,
    device_option,
    run,
)
from transformer.cli.decode_options import decoding_config
from transformer.cli.values import file_name, integer, sentence
from transformer.evaluate.attention_maps import KINDS, attention_weights
from transformer.evaluate.plot import draw_attention, image_format


def build_parser() -> argparse.ArgumentParser:
    """The command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="transformer-attention",
        description="Draw the attention weights a checkpoint uses on one sentence pair.",
    )
    parser.add_argument(
        "--checkpoint",
        required=True,
        type=file_name,
        help="checkpoint file (.pt), or a run directory (its checkpoint_best.pt, else _last)",
    )
    parser.add_argument("--src", required=True, type=sentence, help="source sentence")
    parser.add_argument(
        "--tgt",
        default=None,
        type=sentence,
        help="target sentence to force-decode (default: translate --src)",
    )
    parser.add_argument(
        "--kind",
        choices=KINDS,
        default="cross",
        help="self (encoder), cross (encoder-decoder) or decoder-self (default: cross)",
    )
    parser.add_argument(
        "--layer", type=integer, default=-1, help="0-based layer to draw (default: the last)"
    )
    parser.add_argument(
        "--head",
        type=integer,
        action="append",
        default=None,
        help="0-based head to draw; repeat for several (default: all heads)",
    )
    parser.add_argument(
        "--average-heads", action="store_true", help="draw the mean over the heads in one panel"
    )
    parser.add_argument(
        "--beam-size",
        type=integer,
        default=None,
        help="beam for translating (1 = greedy; default: the checkpoint's decode.beam_size)",
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (default: cpu)")
    parser.add_argument(
        "--output", type=file_name, help="image to write; its suffix is the format (map.png)"
    )
    parser.add_argument(
        "--json", type=file_name, help="write all layers' and heads' weights as JSON"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run transformer-attention; returns the exit status.

    Returns:
        The exit status, by the rule of `transformer.cli.common`: 0 on success; 2 for a wrong
        command line (no --output or --json, an --output format matplotlib cannot write,
        --output and --json naming one file, --beam-size below 1, a --layer or --head out of
        range for the model, an unknown --device); 1 after a one-line
        `transformer-attention: error: ...` when the work cannot be done (matplotlib missing
        for --output, an output that would overwrite the checkpoint or cannot be written as a
        file, or whose directory does not exist, a missing or invalid checkpoint, a
        --checkpoint directory without one, an unusable --src / --tgt).
    """
    return run(build_parser(), _draw, argv)


def _draw(args: argparse.Namespace) -> None:
    """Collect the weights, write the JSON and draw the image, as `args` asks."""
    if args.output is None and args.json is None:
        raise UsageError("give --output FILE.png, --json FILE, or both")
    decoding_config(args)  # --beam-size alone, before the model loads
    if args.output is not None:  # fail before loading the model
        try:
            image_format(args.output)
        except ImportError as error:  # says how to install matplotlib
            raise ValueError(str(error)) from None
        except ValueError as error:
            raise UsageError(f"--output {error}") from None
    outputs = [(args.output, "--output"), (args.json, "--json")]
    check_distinct_outputs(outputs)
    checkpoint = checkpoint_file(args.checkpoint, "transformer-attention")
    for path, flag in outputs:
        if path is not None:
            check_output_path(path, [checkpoint], flag)
    device = device_option(args.device)

    from transformer.checkpoint import load_checkpoint

    model, tokenizer, config = load_checkpoint(checkpoint, device=device)
    problem = _layer_head_problem(model.config, args)
    if problem:
        raise UsageError(problem)
    decode = decoding_config(args, config.decode)
    maps = attention_weights(model, tokenizer, args.src, args.tgt, args.kind, decode)
    print(f"source: {maps.source}")
    if maps.target is not None:
        print(f"target: {maps.target}" + ("" if args.tgt is not None else "  (translated)"))
    if args.json is not None:
        atomic_write_text(args.json, json.dumps(maps.to_dict(), ensure_ascii=False))
        print(f"wrote {args.json}")
    if args.output is not None:
        draw_attention(maps, args.layer, args.head, args.average_heads, args.output)
        print(f"wrote {args.output}")


def _layer_head_problem(config, args: argparse.Namespace) -> str | None:
    """A message naming an out-of-range --layer or --head, else None (checked before decoding)."""
    n_layers = config.n_encoder_layers if args.kind == "self" else config.n_decoder_layers
    if not -n_layers <= args.layer < n_layers:
        return (
            f"--layer {args.layer} is out of range: the {args.kind} stack has {n_layers} layers "
            f"(0 to {n_layers - 1}, or -{n_layers} to -1 from the last)"
        )
    for head in args.head or []:
        if not 0 <= head < config.n_heads:
            return (
                f"--head {head} is out of range: the model has {config.n_heads} heads "
                f"(0 to {config.n_heads - 1})"
            )
    return None


if __name__ == "__main__":
    sys.exit(main())
