"""`transformer-translate`: translate text line by line with a checkpoint.

    transformer-translate --checkpoint checkpoints/run/checkpoint_best.pt < input.en > output.de
    transformer-translate --checkpoint ckpt.pt --input test.en --output test.hyp.de --beam-size 4
    transformer-translate --checkpoint checkpoints/run < input.en   # its best, else last
    transformer-translate --checkpoint a.pt b.pt c.pt < input.en    # an ensemble
    transformer-translate --checkpoint ckpt.pt --sampling --top-p 0.9 --seed 1 < mono.de

Reads stdin (or `--input`), writes one line per input line, in order, to stdout (or `--output`;
`-` names stdin / stdout); an empty or whitespace-only line gives an empty line. Decoding
defaults are the checkpoint's decode section (the paper's, section 6.1: beam size 4, length
penalty alpha 0.6, maximum output length = input length + 50); an option overrides it. Input is
read and translated `--buffer-size` lines at a time, each chunk's output written before the
next is read (`transformer.decode.stream`: memory does not grow with the input); from a
terminal each line is translated as it is entered, after a `> ` prompt on stderr. Several
checkpoints decode as an ensemble (their mean probability, `transformer.decode.ensemble`).
`--sampling` draws translations at random (`transformer.decode.sampling`); with
`--prefix-separator SEP` an input line `source SEP prefix` gives a translation that starts
with the prefix (`transformer.cli.prefix_lines`: a line without it has none; the separator
twice is an error, the separator without its spaces a warning); `--print-alignment` appends
` ||| ` and the word alignment `0-0 1-2 ...` (Pharaoh, source-target, 0-based;
`transformer.decode.alignment`) to each output line.
With `--nbest N` (N > 1) every input line gives exactly N lines `index ||| translation ||| score`
(the Moses n-best format; index counts input lines from 0). An empty input line gives N lines
with an empty translation and score 0.000000; when beam search finds fewer than N distinct
translations (a tiny vocabulary), the missing lines have an empty translation and score -inf.

The maximum output length a * source tokens + b is capped at the model's `max_positions`; the
source itself is never cut (positions past the table are computed on the fly). A line whose
limit the cap lowers is named on stderr with its token count, since its translation may be cut.

`--checkpoint` may name a run directory: its `checkpoint_best.pt`, else `checkpoint_last.pt`
(the one picked is named on stderr). `--output` is written atomically (`transformer.atomic`):
after an error or Ctrl-C it holds its old content. It is refused, before any work, when its
directory does not exist or when it is an input (the file stdin reads too).
Exit status: the rule of `transformer.cli.common` (0 ok, 2 wrong command line, 1 the work could
not be done, 130 interrupted).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import stat
import sys
from collections.abc import Callable

from tqdm import tqdm

from transformer.atomic import atomic_write
from transformer.cli.common import (
    UsageError,
    check_output_path,
    checkpoint_file,
    device_option,
    is_out_of_memory,
    one_line,
    run,
)
from transformer.cli.decode_options import (
    add_decoding_arguments,
    decoding_config,
    warn_capped_lines,
)
from transformer.cli.prefix_lines import split_prefix_lines
from transformer.cli.values import file_name, integer
from transformer.data.corpus import count_lines
from transformer.decode.alignment import check_layer, pharaoh
from transformer.decode.config import DecodeConfig
from transformer.decode.stream import read_lines_lazily, translate_stream

PROG = "transformer-translate"


def _exactly(entries: list[tuple[str, float]], n: int, blank: bool) -> list[tuple[str, float]]:
    """`entries` padded to `n`: with ("", 0.0) for a blank input line, else ("", -inf)."""
    filler = ("", 0.0) if blank else ("", float("-inf"))
    return (entries + [filler] * n)[:n]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="transformer-translate",
        description="Translate text line by line with a trained Transformer checkpoint.",
    )
    parser.add_argument(
        "--checkpoint",
        required=True,
        nargs="+",
        action="extend",  # `--checkpoint a.pt --checkpoint b.pt`: both, an ensemble
        type=file_name,
        help="checkpoint file (.pt), or a run directory (its checkpoint_best.pt, else _last); "
        "several: an ensemble",
    )
    parser.add_argument(
        "--input", type=file_name, help="source text file, one sentence a line (default/-: stdin)"
    )
    parser.add_argument(
        "--output", type=file_name, help="where to write translations (default/-: stdout)"
    )
    parser.add_argument(
        "--nbest",
        type=integer,
        default=1,
        help="write exactly N lines 'index ||| translation ||| score' per input line "
        "(an empty line: N lines with score 0; missing hypotheses: empty, score -inf)",
    )
    add_decoding_arguments(parser)  # the search and sampling options, as transformer-evaluate's
    _add_features(parser)
    return parser


def _add_features(parser: argparse.ArgumentParser) -> None:
    """Options beyond decoding a file line by line: prefixes, alignments, streaming."""
    group = parser.add_argument_group("input and output")
    group.add_argument(
        "--print-alignment", action="store_true", help="append ' ||| ' and the word alignment"
    )
    group.add_argument("--alignment-layer", type=integer, help="decoder layer that aligns (-1)")
    group.add_argument("--prefix-separator", help="input 'source SEP prefix' (e.g. ' ||| ')")
    group.add_argument(
        "--buffer-size", type=integer, default=1000, help="lines translated together (1000)"
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of `transformer-translate` (see the module docstring).

    Returns:
        The exit status, by the rule of `transformer.cli.common`: 0 on success; 2 for a wrong
        command line (a decoding option out of range, `--nbest` above the beam size (the
        samples) or with `--greedy`, `--greedy` with `--sampling` or `--beam-size`, a
        sampling option without it, `--alignment-layer` out of range, an unknown
        `--device`); 1 after a one-line error (also for checkpoints with different
        vocabularies) when the work cannot be
        done (a missing or bad checkpoint or input file, a `--checkpoint` directory without
        checkpoint_best.pt or checkpoint_last.pt, invalid UTF-8 input, a line with the
        --prefix-separator twice, an output whose
        directory does not exist or that would overwrite an input, the file read from stdin
        included).
    """
    return run(build_parser(), _translate, argv)


def _translate(args: argparse.Namespace) -> None:
    """Translate as `args` asks (see `main`)."""
    given = decoding_config(args)  # the options alone, before anything is read
    _check_options(args, given)
    checkpoints = [checkpoint_file(path, PROG) for path in args.checkpoint]
    from_stdin, to_stdout = args.input in (None, "-"), args.output in (None, "-")
    if not to_stdout:
        inputs = [None if from_stdin else args.input, *checkpoints]
        check_output_path(args.output, inputs, "--output")
        if from_stdin:
            _check_not_stdin(args.output)
    device = device_option(args.device)
    from transformer.decode.translator import Translator

    source = sys.stdin.buffer if from_stdin else open(args.input, "rb")  # missing: fails here
    with contextlib.nullcontext() if from_stdin else source:
        load = Translator.from_checkpoints if len(checkpoints) > 1 else Translator.from_checkpoint
        translator = load(
            checkpoints if len(checkpoints) > 1 else checkpoints[0],
            device=device,
            linear_kernel=args.linear_kernel,
        )
        decode = decoding_config(args, translator.config.decode)
        _check_options(args, decode, translator.model)  # against the checkpoint's section
        interactive = from_stdin and sys.stdin.isatty()
        name = "<stdin>" if from_stdin else args.input
        lines = read_lines_lazily(source, name, prompt="> " if interactive else None)
        size = 1 if interactive else args.buffer_size
        regular = not from_stdin and os.path.isfile(args.input)  # a FIFO is read once only
        total = count_lines(args.input) if regular else None
        # A bar on a terminal only (disable=None): in a log file it is carriage-return noise.
        with tqdm(total=total, disable=True if from_stdin else None, unit="sent") as bar:
            work = _chunk_translator(args, translator, decode, bar)
            if to_stdout:
                write = lambda text: (sys.stdout.write(text), sys.stdout.flush())  # noqa: E731
                translate_stream(lines, work, size, write)
            else:
                atomic_write(
                    args.output,
                    lambda file: translate_stream(
                        lines, work, size, lambda text: file.write(text.encode("utf-8"))
                    ),
                )


def _chunk_translator(args, translator, decode: DecodeConfig, bar) -> Callable:
    """(lines, index of the first) -> the output text of each line (see the module docstring)."""
    settings = dict(dataclasses.asdict(decode), greedy=args.greedy)
    layer = -1 if args.alignment_layer is None else args.alignment_layer

    def work(lines: list[str], first: int) -> list[str]:
        prefix = None
        if args.prefix_separator is not None:
            name = "<stdin>" if args.input in (None, "-") else args.input
            lines, prefix = split_prefix_lines(lines, args.prefix_separator, name, first, PROG)
        warn_capped_lines(PROG, translator, lines, settings, first + 1)
        try:
            found = translator.generate(
                lines, args.nbest, args.print_alignment, layer, first, prefix=prefix, **settings
            )
        except RuntimeError as error:
            if not is_out_of_memory(error):
                raise
            raise RuntimeError(_out_of_memory(lines, first)) from error
        bar.update(len(lines))
        return [
            _output(args, first + i, translations, blank=not line.strip())
            for i, (translations, line) in enumerate(zip(found, lines, strict=True))
        ]

    return work


def _out_of_memory(lines: list[str], first: int) -> str:
    """The one-line message for memory that ran out on the chunk `lines` (0-based `first`),
    naming its longest line: usually the cause (attention memory grows with its square)."""
    words = [len(line.split()) for line in lines]
    longest = max(range(len(lines)), key=words.__getitem__)
    return (
        f"out of memory translating lines {first + 1}-{first + len(lines)}; the longest is line "
        f"{first + longest + 1} ({words[longest]:,} words): split long lines, or lower "
        "--max-tokens or --beam-size"
    )


def _output(args, index: int, translations: list, blank: bool) -> str:
    """The output of one input line: its translation, or its n-best lines."""
    entries = [(one_line(t.text), t.score, pharaoh(t.alignment or [])) for t in translations]
    tail = (lambda rest: f" ||| {rest[0] if rest else ''}") if args.print_alignment else None
    if args.nbest == 1:
        text, _, *rest = entries[0] if entries else ("", 0.0)
        return text + (tail(rest) if tail else "")
    return "\n".join(
        f"{index} ||| {text} ||| {score:.6f}" + (tail(rest) if tail else "")
        for text, score, *rest in _exactly(entries, args.nbest, blank)
    )


def _check_options(args, decode: DecodeConfig, model=None) -> None:
    """Refuse options at odds with each other or, given `model`, with the checkpoint (exit 2);
    `decoding_config` has checked the decoding options (--greedy with --sampling, too)."""
    if args.nbest > 1 and args.greedy:
        raise UsageError(f"--nbest ({args.nbest}) needs beam search, not --greedy")
    if args.buffer_size < 1:
        raise UsageError(f"--buffer-size ({args.buffer_size}) must be at least 1")
    separator = args.prefix_separator
    if separator is not None and (not separator.strip(" ") or {"\n", "\r"} & set(separator)):
        raise UsageError(  # "" or " " splits every line; a line break is never in a line
            f"--prefix-separator {separator!r}: give text that is not only spaces, without a "
            "line break"
        )
    if args.alignment_layer is not None and not args.print_alignment:
        raise UsageError("--alignment-layer needs --print-alignment")
    size_given = args.num_samples if decode.sampling else args.beam_size
    if model is not None or size_given is not None:
        _check_nbest(decode, args.nbest)
    if model is not None and args.print_alignment:
        try:
            check_layer(model, -1 if args.alignment_layer is None else args.alignment_layer)
        except ValueError as error:
            raise UsageError(str(error).replace("alignment_layer", "--alignment-layer")) from None


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
