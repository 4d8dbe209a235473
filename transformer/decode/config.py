"""The `decode:` section of a config: beam search as in section 6.1 of the paper."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class DecodeConfig:
    """The `decode:` section: beam search as in section 6.1 of the paper.

    Raises:
        ValueError: for a value out of range, naming the key (`decode.beam_size`, ...).
    """

    beam_size: int = 4
    length_penalty: float = 0.6
    length_penalty_style: str = "gnmt"
    max_len_a: float = 1.0
    max_len_b: int = 50
    max_tokens: int = 4096

    def __post_init__(self) -> None:
        for name in ("beam_size", "max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"decode.{name} ({getattr(self, name)}) must be at least 1")
        for name in ("length_penalty", "max_len_a", "max_len_b"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):  # also rejects NaN
                raise ValueError(f"decode.{name} ({value}) must be a finite number >= 0")
        if self.length_penalty_style not in ("gnmt", "power"):
            raise ValueError(
                f"decode.length_penalty_style ({self.length_penalty_style!r}) must be one of "
                "gnmt, power"
            )
