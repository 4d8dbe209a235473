"""The `decode:` section of a config: beam search as in section 6.1 of the paper.

`DecodeConfig` is the one rule set for decoding settings. Every way in builds one and lets it
check the values: the YAML config (`transformer.config`), the Python API (`Translator.translate`
and `translate_nbest`) and the command line (`transformer.cli.common.decoding_config`, which
says `--beam-size` where the message says `decode.beam_size`). The searches, the length penalty
and the batching below them trust what they are given.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

LENGTH_PENALTY_STYLES = ("gnmt", "power")
# Far above any real setting (the paper and GNMT use 0.6, fairseq 1.0), and low enough that
# lp(|Y|) = ((5 + |Y|) / 6) ** alpha or |Y| ** alpha stays a finite float for any length.
MAX_LENGTH_PENALTY = 10.0
# Output lengths are capped by the model's positions anyway; this keeps every integer
# conversion of a * S + b within 64 bits.
MAX_LEN_B = 2**31


def _finite(value: numbers.Real) -> bool:
    """Whether `value` is a finite float; an integer beyond float range counts as infinite."""
    try:
        return math.isfinite(value)
    except OverflowError:  # math.isfinite(10**400)
        return False


@dataclass(frozen=True)
class DecodeConfig:
    """The `decode:` section: beam search as in section 6.1 of the paper.

    Attributes:
        beam_size: Beams per sentence, K (the paper: 4).
        length_penalty: alpha of the length penalty (the paper: 0.6), in [0, 10]
            (`MAX_LENGTH_PENALTY`); 0 turns it off.
        length_penalty_style: One of `LENGTH_PENALTY_STYLES`: "gnmt", ((5 + |Y|) / 6) ** alpha
            (Wu et al., 2016, cited in 6.1), or "power", |Y| ** alpha.
        max_len_a, max_len_b: Maximum output length = a * source tokens + b (6.1: input + 50),
            at most the model's `max_positions`; a is a finite number >= 0, b an integer in
            [0, 2**31] (`MAX_LEN_B`).
        max_tokens: Source tokens per decoding batch, padding included.

    Raises:
        ValueError: for a value of the wrong type or out of range, naming the key
            (`decode.beam_size (0) must be at least 1`).
    """

    beam_size: int = 4
    length_penalty: float = 0.6
    length_penalty_style: str = "gnmt"
    max_len_a: float = 1.0
    max_len_b: int = 50
    max_tokens: int = 4096

    def __post_init__(self) -> None:
        for name in ("beam_size", "max_tokens", "max_len_b"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ValueError(f"decode.{name} ({value!r}) must be an integer")
        for name in ("beam_size", "max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"decode.{name} ({getattr(self, name)}) must be at least 1")
        if self.max_len_b > MAX_LEN_B:
            raise ValueError(f"decode.max_len_b ({self.max_len_b}) must be at most 2**31")
        for name in ("length_penalty", "max_len_a", "max_len_b"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(f"decode.{name} ({value!r}) must be a number")
            if not (_finite(value) and value >= 0):  # also rejects NaN
                raise ValueError(f"decode.{name} ({value}) must be a finite number >= 0")
        if self.length_penalty > MAX_LENGTH_PENALTY:
            raise ValueError(
                f"decode.length_penalty ({self.length_penalty}) must be at most "
                f"{MAX_LENGTH_PENALTY:g} (the paper uses 0.6)"
            )
        if self.length_penalty_style not in LENGTH_PENALTY_STYLES:
            raise ValueError(
                f"decode.length_penalty_style ({self.length_penalty_style!r}) must be one of "
                f"{', '.join(LENGTH_PENALTY_STYLES)}"
            )

    def check_nbest(self, nbest: int) -> None:
        """Check that beam search can return `nbest` hypotheses: 1 <= nbest <= beam_size.

        The n-best list is drawn from the finished beams, so it cannot be longer than the beam.

        Raises:
            ValueError: `nbest (5) must be between 1 and beam_size (4)`, or for a non-integer.
        """
        if isinstance(nbest, bool) or not isinstance(nbest, numbers.Integral):
            raise ValueError(f"nbest ({nbest!r}) must be an integer")
        if not 1 <= nbest <= self.beam_size:
            raise ValueError(f"nbest ({nbest}) must be between 1 and beam_size ({self.beam_size})")
