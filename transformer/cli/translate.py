"""`transformer-translate`: translate text line by line with a checkpoint.

    transformer-translate --checkpoint checkpoints/run/checkpoint_best.pt < input.en > output.de
    transformer-translate --checkpoint ckpt.pt --input test.en --output test.hyp.de --beam-size 4

Reads stdin (or `--input`), writes one line per input line, in order, to stdout (or `--output`);
an empty or whitespace-only line gives an empty line. Decoding defaults are the paper's
(section 6.1): beam size 4, length penalty alpha 0.6, maximum output length = input length + 50.
With `--nbest N` (N > 1) every input line gives exactly N lines `index ||| translation ||| score`
(the Moses n-best format; index counts input lines from 0). An empty input line gives N lines
with an empty translation and score 0.000000; when beam search finds fewer than N distinct
translations (a tiny vocabulary), the missing lines have an empty translation and score -inf.

The maximum output length a * source tokens + b is capped at the model's `max_positions`; the
source itself is never cut (positions past the table are computed on the fly). A line whose
limit the cap lowers is named on stderr with its token count, since its translation may be cut.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transformer.cli.common import (
    add_decoding_arguments,
    check_decoding_arguments,
    check_output_path,
    decoding_settings,
    one_line,
    read_stdin_lines,
    warn_capped_lines,
)
from transformer.data.corpus import read_lines
from transformer.device import resolve_device


def _exactly(entries: list[tuple[str, float]], n: int, blank: bool) -> list[tuple[str, float]]:
    """`entries` padded to `n`: with ("", 0.0) for a blank input line, else ("", -inf)."""
    filler = ("", 0.0) if blank else ("", float("-inf"))
    return (entries + [filler] * n)[:n]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="transformer-translate",
        description="Translate text line by line with a trained Transformer checkpoint.",
    )
    parser.add_argument("--checkpoint", required=True, help="checkpoint file (.pt)")
    parser.add_argument("--input", help="source text file, one sentence a line (default: stdin)")
    parser.add_argument("--output", help="where to write translations (default: stdout)")
    parser.add_argument(
        "--nbest",
        type=int,
        default=1,
        help="write exactly N lines 'index ||| translation ||| score' per input line "
        "(an empty line: N lines with score 0; missing hypotheses: empty, score -inf)",
    )
    add_decoding_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `transformer-translate` (see the module docstring).

    Returns:
        0 on success; 1 after printing a one-line error (a missing checkpoint or input file, a
        bad checkpoint, invalid UTF-8 input, inconsistent options). argparse exits with 2 on
        malformed arguments.
    """
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except (FileNotFoundError, ValueError) as error:
        print(f"transformer-translate: error: {error}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    """Translate as `args` asks (see `main`)."""
    if args.nbest < 1:
        raise ValueError(f"--nbest ({args.nbest}) must be at least 1")
    if args.nbest > 1 and args.greedy:
        raise ValueError(f"--nbest ({args.nbest}) needs beam search, not --greedy")
    check_decoding_arguments(args)
    if args.beam_size is not None and args.nbest > args.beam_size:
        raise ValueError(f"nbest ({args.nbest}) must be between 1 and beam_size ({args.beam_size})")
    if args.output:
        check_output_path(args.output, [args.input, args.checkpoint], "--output")
    device = resolve_device(args.device, what="--device")
    from transformer.decode.translator import Translator

    lines = read_lines(args.input) if args.input else read_stdin_lines()
    translator = Translator.from_checkpoint(args.checkpoint, device=device)
    settings = decoding_settings(args, getattr(translator.config, "decode", None))
    warn_capped_lines("transformer-translate", translator, lines, settings)
    progress = args.input is not None
    if args.nbest > 1:
        del settings["greedy"]
        nbest = translator.translate_nbest(lines, nbest=args.nbest, progress=progress, **settings)
        out_lines = [
            f"{index} ||| {one_line(text)} ||| {score:.6f}"
            for index, entries in enumerate(nbest)
            for text, score in _exactly(entries, args.nbest, blank=not lines[index].strip())
        ]
    else:
        out_lines = [
            one_line(t) for t in translator.translate(lines, progress=progress, **settings)
        ]
    text = "".join(line + "\n" for line in out_lines)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
