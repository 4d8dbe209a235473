"""`transformer-score`: log P(target | source) of given sentence pairs, one line per pair.

    transformer-score --checkpoint ckpt.pt --src test.en --tgt test.hyp.de > scores.tsv
    transformer-score --checkpoint a.pt b.pt --src bt.en --tgt bt.de --length-penalty 1.0

Each output line holds four tab-separated numbers for the pair of the same line:

    log_prob    per_token    score    length

`log_prob` = log P(Y | X), summed over the target tokens and the final eos; `length` = |Y|,
the number of those terms (target tokens + 1); `per_token` = log_prob / |Y|; `score` =
log_prob / lp(|Y|) with the length penalty of beam search (`--length-penalty`,
`--length-penalty-style`; default: the checkpoint's decode section), so a beam hypothesis scores
what `transformer-translate --nbest` printed for it. Several checkpoints score as an ensemble
(the mean of their probabilities, `transformer.decode.ensemble`). Pairs are batched by length
(`--max-tokens` tokens of the longer side per batch) and read `--buffer-size` lines at a time,
so memory does not grow with the files. A source line without tokens is an error naming it
(log P(Y | X) needs a source); an empty target is scored (log P(eos | X)).

`--output` is written atomically (`transformer.atomic`). Exit status: the rule of
`transformer.cli.common` (0 ok, 2 wrong command line, 1 the work could not be done, 130
interrupted).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

from transformer.atomic import atomic_write
from transformer.cli.common import (
    UsageError,
    check_output_path,
    checkpoint_file,
    device_option,
    run,
)
from transformer.cli.decode_options import decoding_config
from transformer.cli.values import file_name, integer, number
from transformer.cpu.onednn import LINEAR_KERNELS
from transformer.data.corpus import count_lines
from transformer.decode.config import LENGTH_PENALTY_STYLES
from transformer.decode.stream import chunks, read_lines_lazily

PROG = "transformer-score"


def build_parser() -> argparse.ArgumentParser:
    """The command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Score sentence pairs: log P(target | source) per line."
    )
    parser.add_argument(
        "--checkpoint",
        required=True,
        nargs="+",
        action="extend",  # `--checkpoint a.pt --checkpoint b.pt`: both, an ensemble
        type=file_name,
        help="checkpoint file(s) or run directories; several score as an ensemble",
    )
    parser.add_argument("--src", required=True, type=file_name, help="source sentences")
    parser.add_argument("--tgt", required=True, type=file_name, help="target sentences")
    parser.add_argument("--output", type=file_name, help="where to write (default/-: stdout)")
    parser.add_argument("--length-penalty", type=number, help="alpha of lp(|Y|) for `score`")
    parser.add_argument("--length-penalty-style", choices=LENGTH_PENALTY_STYLES)
    parser.add_argument("--max-tokens", type=integer, help="tokens per batch (default 4096)")
    parser.add_argument("--buffer-size", type=integer, default=2000, help="lines read at a time")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    parser.add_argument("--linear-kernel", choices=LINEAR_KERNELS, default="auto")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `transformer-score` (see the module docstring).

    Returns:
        The exit status, by the rule of `transformer.cli.common`: 0 on success; 2 for a wrong
        command line (an option out of range, an unknown `--device`); 1 after a one-line error
        when the work cannot be done (a missing or bad checkpoint or file, files of different
        lengths, a source line without tokens, checkpoints with different vocabularies, an
        output that would overwrite an input).
    """
    return run(build_parser(), _score, argv)


def _score(args: argparse.Namespace) -> None:
    """Score the pairs as `args` asks (see `main`)."""
    decoding_config(args)  # the options alone, before anything is read
    if args.buffer_size < 1:
        raise UsageError(f"--buffer-size ({args.buffer_size}) must be at least 1")
    checkpoints = [checkpoint_file(path, PROG) for path in args.checkpoint]
    to_stdout = args.output in (None, "-")
    if not to_stdout:
        check_output_path(args.output, [args.src, args.tgt, *checkpoints], "--output")
    # Regular files are counted first (missing: OSError); a pipe can be read only once, so
    # its end is found while scoring (`_numbered`).
    regular = all(Path(path).is_file() for path in (args.src, args.tgt))
    lengths = {path: count_lines(path) for path in (args.src, args.tgt) if regular}
    if regular and lengths[args.src] != lengths[args.tgt]:
        raise ValueError(
            f"line count mismatch: {args.src} has {lengths[args.src]} lines but {args.tgt} has "
            f"{lengths[args.tgt]}; they must correspond line by line"
        )
    device = device_option(args.device)
    from transformer.decode.translator import Translator

    translator = Translator.from_checkpoints(
        checkpoints, device=device, linear_kernel=args.linear_kernel
    )
    decode = decoding_config(args, translator.config.decode)
    options = dict(
        length_penalty=decode.length_penalty,
        length_penalty_style=decode.length_penalty_style,
        max_tokens=decode.max_tokens,
    )

    def lines(write) -> None:
        with ExitStack() as stack:
            src, tgt = (stack.enter_context(open(path, "rb")) for path in (args.src, args.tgt))
            for first, pairs in _numbered(read_lines_lazily(src, args.src), tgt, args):
                for offset, source in enumerate(source for source, _ in pairs):
                    if not source.strip():
                        raise ValueError(f"{args.src}: line {first + offset} has no tokens")
                scores = translator.score([s for s, _ in pairs], [t for _, t in pairs], **options)
                write(
                    "".join(
                        f"{s.log_prob:.6f}\t{s.per_token:.6f}\t{s.score:.6f}\t{s.length}\n"
                        for s in scores
                    )
                )

    if to_stdout:
        lines(lambda text: (sys.stdout.write(text), sys.stdout.flush()))
    else:
        atomic_write(args.output, lambda file: lines(lambda text: file.write(text.encode())))


def _numbered(sources: Iterator[str], tgt, args) -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """(first line number, pairs) chunks of the two files, read in step.

    Raises:
        ValueError: naming both files, when one ends before the other (pipes are not counted
            beforehand).
    """
    targets = read_lines_lazily(tgt, args.tgt)
    first = 1
    for chunk in chunks(_in_step(sources, targets, args), args.buffer_size):
        yield first, chunk
        first += len(chunk)


def _in_step(sources: Iterator[str], targets: Iterator[str], args) -> Iterator[tuple[str, str]]:
    """The pairs of the two files; ValueError naming both when one ends first."""
    pairs = itertools.zip_longest(sources, targets)
    for line, (source, target) in enumerate(pairs, start=1):
        if source is None or target is None:
            ended, other = (args.src, args.tgt) if source is None else (args.tgt, args.src)
            raise ValueError(
                f"line count mismatch: {ended} ends after {line - 1} lines but {other} has "
                "more; they must correspond line by line"
            )
        yield source, target


if __name__ == "__main__":
    sys.exit(main())
