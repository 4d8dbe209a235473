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
import math
import re
import sys
from pathlib import Path

import torch

from transformer.checkpoint import usable_device
from transformer.config import DecodeConfig
from transformer.corpus import check_output_path, decode_lines, read_lines

DECODE_OPTIONS = (
    "beam_size",
    "length_penalty",
    "length_penalty_style",
    "max_len_a",
    "max_len_b",
    "max_tokens",
)
_DEVICE_NAME = re.compile(r"auto|cpu|cuda(:\d+)?")


def add_decoding_arguments(parser: argparse.ArgumentParser) -> None:
    """Decoding options shared by transformer-translate and transformer-evaluate.

    Options left unset take the checkpoint's `decode:` section (`DecodeConfig`), whose defaults
    are the paper's (section 6.1): beam 4, alpha 0.6, maximum output length = input + 50.
    """
    group = parser.add_argument_group(
        "decoding (default: the checkpoint's decode section, i.e. the paper's settings)"
    )
    group.add_argument("--beam-size", type=int, help="beams per sentence (paper: 4)")
    group.add_argument(
        "--greedy", action="store_true", help="greedy decoding instead of beam search"
    )
    group.add_argument(
        "--length-penalty", type=float, help="alpha of the length penalty (paper: 0.6)"
    )
    group.add_argument(
        "--length-penalty-style",
        choices=("gnmt", "power"),
        help="gnmt: ((5+|Y|)/6)^alpha (the paper's, default); power: |Y|^alpha",
    )
    group.add_argument(
        "--max-len-a", type=float, help="max output length = a * source length + b (a = 1)"
    )
    group.add_argument("--max-len-b", type=int, help="(b = 50)")
    group.add_argument("--max-tokens", type=int, help="source tokens per batch (4096)")
    group.add_argument(
        "--device", default="auto", help="cpu, cuda, cuda:N or auto (cuda when available)"
    )


def resolve_device(name: str) -> torch.device:
    """Map "auto" to cuda when available, else cpu; check that a requested cuda exists.

    Raises:
        ValueError: for a name other than cpu, cuda, cuda:N or auto, or a CUDA device that this
            machine does not have.
    """
    if not _DEVICE_NAME.fullmatch(name):
        raise ValueError(f"--device {name!r} is not a device; use cpu, cuda, cuda:N or auto")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return usable_device(name)


def check_decoding_arguments(args: argparse.Namespace) -> None:
    """Reject decoding options out of range, naming the option, before any model is loaded.

    Raises:
        ValueError: as `DecodeConfig` would, with `--beam-size` etc. in place of the key.
    """
    for name in DECODE_OPTIONS:
        value = getattr(args, name, None)
        if value is None:
            continue
        try:
            DecodeConfig(**{name: value})
        except ValueError as error:
            option = "--" + name.replace("_", "-")
            raise ValueError(str(error).replace(f"decode.{name}", option)) from None


def warn_capped_lines(prog: str, translator, lines: list[str], settings: dict) -> None:
    """Name on stderr every line whose output limit a * S + b exceeds `max_positions`.

    The decoder stops at `model.config.max_positions` tokens (see `transformer.decoding`), so
    the translation of such a line is cut if it would be longer; this says which line.
    """
    cap = translator.model.config.max_positions
    a, b = settings["max_len_a"], settings["max_len_b"]
    for number, ids in enumerate(translator.tokenizer.encode_batch(lines), start=1):
        limit = math.floor(a * len(ids) + b)
        if ids and limit > cap:
            print(
                f"{prog}: warning: line {number} has {len(ids)} source tokens; its translation "
                f"is limited to max_positions ({cap}) tokens instead of {limit} "
                "(max-len-a * tokens + max-len-b) and is cut if longer",
                file=sys.stderr,
            )


def decoding_settings(args: argparse.Namespace, decode: DecodeConfig | None) -> dict:
    """Keyword arguments of `Translator.translate`: the command line over `decode`.

    Args:
        args: Parsed options of `add_decoding_arguments` (None = not given).
        decode: The checkpoint's decode section; None means `DecodeConfig()` (the paper's).
    """
    decode = decode or DecodeConfig()
    settings = {name: getattr(decode, name) for name in DECODE_OPTIONS}
    settings.update({k: v for k, v in vars(args).items() if k in settings and v is not None})
    settings["greedy"] = args.greedy
    return settings


def _read_stdin_lines() -> list[str]:
    """Lines of stdin as UTF-8; only "\\n" separates lines (as `corpus.read_lines`).

    Raises:
        ValueError: `<stdin>: line N is not valid UTF-8 (...)`.
    """
    return decode_lines(sys.stdin.buffer.read(), "<stdin>")


def _one_line(text: str) -> str:
    """A translation never spans lines, so output line i always belongs to input line i."""
    return " ".join(text.splitlines())


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
    device = resolve_device(args.device)
    from transformer.translator import Translator

    lines = read_lines(args.input) if args.input else _read_stdin_lines()
    translator = Translator.from_checkpoint(args.checkpoint, device=device)
    settings = decoding_settings(args, getattr(translator.config, "decode", None))
    warn_capped_lines("transformer-translate", translator, lines, settings)
    progress = args.input is not None
    if args.nbest > 1:
        del settings["greedy"]
        nbest = translator.translate_nbest(lines, nbest=args.nbest, progress=progress, **settings)
        out_lines = [
            f"{index} ||| {_one_line(text)} ||| {score:.6f}"
            for index, entries in enumerate(nbest)
            for text, score in _exactly(entries, args.nbest, blank=not lines[index].strip())
        ]
    else:
        out_lines = [
            _one_line(t) for t in translator.translate(lines, progress=progress, **settings)
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
