"""What every console script shares: decoding options, devices, input and output files, exit codes.

Exit status of every command: 0 on success; 2 when the command line itself is wrong (argparse's
own errors, an option value out of range, an invalid config file or override), printed by
argparse as `PROG: error: ...`; 1 when the command could not do its work (a missing or unreadable
input file, a bad checkpoint, a failed download, a non-finite training loss), printed as one line
`PROG: error: ...`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from transformer.data.corpus import decode_lines
from transformer.decode.config import DecodeConfig


def check_output_path(path: str | Path, inputs: list, flag: str) -> Path:
    """Refuse an output file that would overwrite an input or cannot be written as a file.

    Called before any work, so that a bad path fails in seconds and never after a long
    translation, and so that no input (source, reference, hypotheses, checkpoint) is lost.

    Args:
        path: The output file.
        inputs: Input files of the same command (None entries are skipped).
        flag: The command-line option that named `path`, for the message.

    Returns:
        `path` as a Path.

    Raises:
        ValueError: when `path` is an existing directory, sits under an existing file, or is
            the same file as one of `inputs`.
    """
    out = Path(path)
    if out.is_dir():
        raise ValueError(f"{flag} {out} is a directory; give a file name")
    blocking = next((p for p in out.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise ValueError(f"{flag} {out}: {blocking} is a file, not a directory")
    for given in inputs:
        if given is not None and out.exists() and Path(given).exists():
            if os.path.samefile(out, given):  # also catches symbolic and hard links
                raise ValueError(
                    f"{flag} {out} is also an input of this command ({given}); "
                    "it would be overwritten"
                )
    return out


DECODE_OPTIONS = (
    "beam_size",
    "length_penalty",
    "length_penalty_style",
    "max_len_a",
    "max_len_b",
    "max_tokens",
)


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


def read_stdin_lines() -> list[str]:
    """Lines of stdin as UTF-8; only "\\n" separates lines (as `corpus.read_lines`).

    Raises:
        ValueError: `<stdin>: line N is not valid UTF-8 (...)`.
    """
    return decode_lines(sys.stdin.buffer.read(), "<stdin>")


def one_line(text: str) -> str:
    """A translation never spans lines, so output line i always belongs to input line i."""
    return " ".join(text.splitlines())
