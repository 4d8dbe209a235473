"""The decoding options of transformer-translate and transformer-evaluate: one definition.

Both commands add the same options (`add_decoding_arguments`) and turn them into the settings
they decode with the same way (`decoding_config`), so that the two decode a file alike for the
same command line (sampling included: the same `--seed` draws the same samples). Each
`--x-y` option stands for the field `x_y` of `DecodeConfig`; an option left unset takes the
checkpoint's `decode:` section, whose defaults are the paper's (section 6.1: beam 4, alpha 0.6,
maximum output length = input + 50). The values are checked by `DecodeConfig` alone (the one
rule set of `transformer.decode.config`), whose messages name `--x-y` here instead of
`decode.x_y`; the command line adds one rule of its own: `--greedy` excludes sampling.
`warn_capped_lines` names the lines whose output length limit exceeds the model's positions.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys

from transformer.cli.common import UsageError
from transformer.cli.values import integer, number
from transformer.cpu.onednn import LINEAR_KERNELS
from transformer.decode.config import LENGTH_PENALTY_STYLES, DecodeConfig

DECODE_OPTIONS = tuple(field.name for field in dataclasses.fields(DecodeConfig))


def add_decoding_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the search options, the sampling options, `--device` and `--linear-kernel`.

    Every option but `--greedy`, `--device` and `--linear-kernel` defaults to None ("not
    given": the checkpoint's section decides); `decoding_config` checks them.
    """
    group = parser.add_argument_group(
        "decoding (default: the decode section of the checkpoint's training config, e.g. "
        "configs/multi30k.yaml's alpha 2.5; the values in parentheses are DecodeConfig's defaults)"
    )
    group.add_argument("--beam-size", type=integer, help="beams per sentence (4, the paper's)")
    group.add_argument(
        "--greedy", action="store_true", help="greedy decoding instead of beam search"
    )
    group.add_argument(
        "--length-penalty", type=number, help="alpha of the length penalty (0.6, the paper's)"
    )
    group.add_argument(
        "--length-penalty-style",
        choices=LENGTH_PENALTY_STYLES,
        help="gnmt: ((5+|Y|)/6)^alpha (the paper's, default); power: |Y|^alpha",
    )
    group.add_argument(
        "--max-len-a", type=number, help="max output length = a * source length + b (a = 1)"
    )
    group.add_argument("--max-len-b", type=integer, help="(b = 50)")
    group.add_argument("--max-tokens", type=integer, help="source tokens per batch (4096)")
    group.add_argument(
        "--device", default="auto", help="cpu, cuda, cuda:N or auto (cuda when available)"
    )
    group.add_argument(
        "--linear-kernel",
        choices=LINEAR_KERNELS,
        default="auto",
        help="float32 CPU products: auto (oneDNN on x86-64 CPUs), onednn, or torch "
        "(torch.nn.functional.linear, for like-for-like comparisons)",
    )
    group = parser.add_argument_group(
        "sampling (instead of beam search, e.g. back-translation; transformer.decode.sampling)"
    )
    group.add_argument("--sampling", action="store_true", default=None, help="sample each token")
    group.add_argument("--temperature", type=number, help="> 0 (default 1; near 0: greedy)")
    group.add_argument("--top-k", type=integer, help="only the k most probable tokens (0: all)")
    group.add_argument("--top-p", type=number, help="only the most probable tokens of mass p")
    group.add_argument(
        "--num-samples",
        type=integer,
        help="samples per line: the best scored is the translation (translate's --nbest N "
        "prints N)",
    )
    group.add_argument("--seed", type=integer, help="seed of the samples (default: random)")


def decoding_config(args: argparse.Namespace, decode: DecodeConfig | None = None) -> DecodeConfig:
    """The decoding options given on the command line over `decode`, checked by `DecodeConfig`.

    Called once before the model loads with `decode` None, which checks the given options
    alone (against the paper's defaults for the others), so that a typo fails in seconds; and
    once with the checkpoint's section, for the settings actually used.

    Args:
        args: Parsed options of `add_decoding_arguments` (None or absent = not given; a
            command without `--greedy`, as transformer-score, never has it set).
        decode: The checkpoint's decode section; None means `DecodeConfig()` (the paper's).

    Returns:
        The settings to decode with.

    Raises:
        UsageError: `DecodeConfig`'s message, with `--beam-size` for `decode.beam_size`; or
            `--greedy` with sampling (given or the checkpoint's) or with `--beam-size`.
    """
    given = {name: getattr(args, name, None) for name in DECODE_OPTIONS}
    try:
        config = (decode or DecodeConfig()).override(**given)  # --top-p needs --sampling, too
    except ValueError as error:
        message = re.sub(
            r"\bdecode\.(\w+)", lambda m: "--" + m.group(1).replace("_", "-"), str(error)
        )
        raise UsageError(message) from None
    if getattr(args, "greedy", False) and config.sampling:
        raise UsageError("--greedy and --sampling exclude each other")
    if getattr(args, "greedy", False) and given["beam_size"] is not None:
        raise UsageError("--greedy and --beam-size exclude each other (greedy is one beam)")
    return config


def warn_capped_lines(prog: str, translator, lines: list[str], settings: dict, first=1) -> None:
    """Name on stderr every line whose output limit a * S + b exceeds `max_positions`.

    The decoder stops at `model.config.max_positions` tokens (see `transformer.decode.search`),
    so the translation of such a line is cut if it would be longer; this says which line
    (`lines[0]` is line `first`). The limit is a float, `inf` when a * S overflows.
    """
    cap = translator.model.config.max_positions
    a, b = settings["max_len_a"], settings["max_len_b"]
    for line_number, ids in enumerate(translator.tokenizer.encode_batch(lines), start=first):
        limit = a * len(ids) + b
        if ids and limit >= cap + 1:  # the decoder's limit floor(a * S + b) is above the cap
            shown = math.floor(limit) if math.isfinite(limit) else limit
            print(
                f"{prog}: warning: line {line_number} has {len(ids)} source tokens; its "
                f"translation is limited to max_positions ({cap}) tokens instead of {shown:g} "
                "(max-len-a * tokens + max-len-b) and is cut if longer",
                file=sys.stderr,
            )
