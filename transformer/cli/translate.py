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

`--output` is written atomically (`transformer.atomic`): after an error or Ctrl-C it holds its
old content. It is refused, before any work, when it is an input (the file stdin reads too).
Exit status: the rule of `transformer.cli.common` (0 ok, 2 wrong command line, 1 the work could
not be done, 130 interrupted).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import stat
import sys
from pathlib import Path

from transformer.atomic import atomic_write_text
from transformer.cli.common import (
    UsageError,
    add_decoding_arguments,
    check_output_path,
    decoding_config,
    device_option,
    file_name,
    one_line,
    read_stdin_lines,
    run,
    warn_capped_lines,
)
from transformer.data.corpus import read_lines
from transformer.decode.config import DecodeConfig


def _exactly(entries: list[tuple[str, float]], n: int, blank: bool) -> list[tuple[str, float]]:
    """`entries` padded to `n`: with ("", 0.0) for a blank input line, else ("", -inf)."""
    filler = ("", 0.0) if blank else ("", float("-inf"))
    return (entries + [filler] * n)[:n]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="transformer-translate",
        description="Translate text line by line with a trained Transformer checkpoint.",
    )
    parser.add_argument("--checkpoint", required=True, type=file_name, help="checkpoint file (.pt)")
    parser.add_argument(
        "--input", type=file_name, help="source text file, one sentence a line (default: stdin)"
    )
    parser.add_argument(
        "--output", type=file_name, help="where to write translations (default: stdout)"
    )
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
        The exit status, by the rule of `transformer.cli.common`: 0 on success; 2 for a wrong
        command line (a decoding option out of range, `--nbest` above the beam size or with
        `--greedy`, an unknown `--device`); 1 after a one-line error when the work cannot be
        done (a missing or bad checkpoint or input file, invalid UTF-8 input, an output that
        would overwrite an input, the file read from stdin included).
    """
    return run(build_parser(), _translate, argv)


def _translate(args: argparse.Namespace) -> None:
    """Translate as `args` asks (see `main`)."""
    given = decoding_config(args)  # the options alone, before anything is read
    if args.nbest > 1 and args.greedy:
        raise UsageError(f"--nbest ({args.nbest}) needs beam search, not --greedy")
    if args.beam_size is not None:
        _check_nbest(given, args.nbest)
    if args.output is not None:
        check_output_path(args.output, [args.input, args.checkpoint], "--output")
        if args.input is None:
            _check_not_stdin(args.output)
    device = device_option(args.device)
    from transformer.decode.translator import Translator

    lines = read_lines(args.input) if args.input is not None else read_stdin_lines()
    translator = Translator.from_checkpoint(
        args.checkpoint, device=device, linear_kernel=args.linear_kernel
    )
    decode = decoding_config(args, translator.config.decode)
    _check_nbest(decode, args.nbest)  # against the checkpoint's beam when --beam-size is unset
    settings = dict(dataclasses.asdict(decode), greedy=args.greedy)
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
    if args.output is not None:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _check_not_stdin(output: str) -> None:
    """Refuse `--output` when it is the file stdin reads (`--output src.txt < src.txt`).

    Raises:
        ValueError: naming `output`; it would be replaced by its own translation.
    """
    try:
        stdin = os.fstat(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):  # no stdin, or one without a descriptor
        return
    if stat.S_ISREG(stdin.st_mode) and os.path.exists(output):
        if os.path.samestat(stdin, os.stat(output)):
            raise ValueError(
                f"--output {output} is also the input of this command (read from stdin); "
                "it would be overwritten"
            )


def _check_nbest(decode: DecodeConfig, nbest: int) -> None:
    """`DecodeConfig.check_nbest` for `--nbest`, as a command-line error."""
    try:
        decode.check_nbest(nbest)
    except ValueError as error:
        raise UsageError(str(error)) from None


if __name__ == "__main__":
    sys.exit(main())
