"""The `decode:` section of a config: beam search as in section 6.1 of the paper, or sampling.

`DecodeConfig` is the one rule set for decoding settings. Every way in builds one and lets it
check the values: the YAML config (`transformer.config`), the Python API (`Translator`, whose
defaults are its checkpoint's section, overridden by `DecodeConfig.override`) and the command
line (`transformer.cli.decode_options.decoding_config`, which says `--beam-size` where the
message says `decode.beam_size`). The searches, the length penalty and the batching below them
trust what they are given.
"""

from __future__ import annotations

import dataclasses
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
# Settings that only sampling reads: giving one without `sampling` is a mistake, not a no-op.
SAMPLING_OPTIONS = ("temperature", "top_k", "top_p", "num_samples", "seed")
TOP_P_MARGIN = 1e-6  # top_p is at least this far from 0 and from 1 (or is 1)


def _finite(value: numbers.Real) -> bool:
    """Whether `value` is a finite float; an integer beyond float range counts as infinite."""
    try:
        return math.isfinite(value)
    except OverflowError:  # math.isfinite(10**400)
        return False


@dataclass(frozen=True)
class DecodeConfig:
    """The `decode:` section: beam search as in section 6.1 of the paper, or sampling.

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
        sampling: Draw each token at random instead of searching (`transformer.decode.
            sampling`; for back-translation and data augmentation); the beam is not used.
        temperature: Sampling divides the log-probabilities by it: a finite number > 0;
            below 1 sharpens the distribution (near 0: greedy), above 1 flattens it.
        top_k: Sample among the k most probable tokens only; 0 = all.
        top_p: Sample within the smallest set of most probable tokens whose probability
            reaches p (nucleus sampling, Holtzman et al., 2020), in [1e-6, 1 - 1e-6]; 1 = all.
        num_samples: Samples per sentence, drawn independently (sampling's counterpart of
            `beam_size`: the n-best list is drawn from them), at least 1.
        seed: Seed of the samples, an integer in [0, 2**63); None = drawn from torch's global
            generator (`torch.manual_seed` makes it reproducible too).

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
    sampling: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    num_samples: int = 1
    seed: int | None = None

    def __post_init__(self) -> None:
        for name in ("beam_size", "max_tokens", "max_len_b", "top_k", "num_samples"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ValueError(f"decode.{name} ({value!r}) must be an integer")
        for name in ("beam_size", "max_tokens", "num_samples"):
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
        self._check_sampling()

    def _check_sampling(self) -> None:
        """The rules of the sampling fields (see the class docstring)."""
        if not isinstance(self.sampling, bool):
            raise ValueError(f"decode.sampling ({self.sampling!r}) must be true or false")
        if self.top_k < 0:
            raise ValueError(f"decode.top_k ({self.top_k}) must be at least 0 (0 = off)")
        for name in ("temperature", "top_p"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(f"decode.{name} ({value!r}) must be a number")
        if not (_finite(self.temperature) and self.temperature > 0):
            raise ValueError(f"decode.temperature ({self.temperature}) must be a finite number > 0")
        # float32 sums cannot tell p * total from 0 or from the total nearer than this
        if not (self.top_p == 1 or TOP_P_MARGIN <= self.top_p <= 1 - TOP_P_MARGIN):  # and NaN
            raise ValueError(
                f"decode.top_p ({self.top_p}) must be in [{TOP_P_MARGIN}, {1 - TOP_P_MARGIN}], "
                "or 1 (off)"
            )
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
            raise ValueError(f"decode.seed ({seed!r}) must be an integer or null")
        if seed is not None and not 0 <= seed < 2**63:
            raise ValueError(f"decode.seed ({seed}) must be in [0, 2**63)")

    def override(self, **given: object) -> DecodeConfig:
        """This config with the `given` settings replaced: an explicit argument beats the
        checkpoint's section, which is the default everywhere (Python API and command line).

        Args:
            given: Field names and values; a None value means "not given" (keep this one's).

        Returns:
            The new config, checked by `__post_init__`.

        Raises:
            ValueError: for a name that is not a field (listing the fields), a value out of
                range (as `DecodeConfig(...)`), or a sampling setting (`SAMPLING_OPTIONS`)
                changed while the result does not sample (it would change nothing).
        """
        names = [f.name for f in dataclasses.fields(self)]
        for name in given:
            if name not in names:
                raise ValueError(f"unknown decoding option {name!r}; valid: {', '.join(names)}")
        given = {name: value for name, value in given.items() if value is not None}
        result = dataclasses.replace(self, **given)
        # a sampling setting that changes nothing (its value is this config's) is no mistake
        stray = [
            name
            for name in SAMPLING_OPTIONS
            if given.get(name, getattr(self, name)) != getattr(self, name)
        ]
        if stray and not result.sampling:
            raise ValueError(
                f"decode.{stray[0]} ({given[stray[0]]}) applies to sampling only: "
                "set decode.sampling too"
            )
        return result

    @property
    def rows_per_sentence(self) -> int:
        """Hypotheses a sentence keeps per step: the samples when sampling, else the beams."""
        return self.num_samples if self.sampling else self.beam_size

    def check_nbest(self, nbest: int) -> None:
        """Check that the search can return `nbest` hypotheses: 1 <= nbest <= beam_size (or
        num_samples, when sampling).

        The n-best list is drawn from the finished beams (or the samples), so it cannot be
        longer than the beam.

        Raises:
            ValueError: `nbest (5) must be between 1 and beam_size (4)`, or for a non-integer.
        """
        if isinstance(nbest, bool) or not isinstance(nbest, numbers.Integral):
            raise ValueError(f"nbest ({nbest!r}) must be an integer")
        if not 1 <= nbest <= self.rows_per_sentence:
            name = "num_samples" if self.sampling else "beam_size"
            raise ValueError(
                f"nbest ({nbest}) must be between 1 and {name} ({self.rows_per_sentence})"
            )
