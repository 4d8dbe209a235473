"""What callers give `Translator`, checked once where it comes in.

- Sentences: a single string (the call then returns a single result, as `pipeline` users
  expect) or a list or tuple of strings (a list of results, in order).
- Options: the fields of `DecodeConfig` (their defaults are the translator's own section, the
  checkpoint's; an explicit value overrides it, `DecodeConfig.override`), plus the call's own:
  `greedy`, `prefix` and `progress`. An unknown name, a value of the wrong type or out of range
  is one `ValueError` naming it, raised before anything is translated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transformer.decode.config import DecodeConfig

CALL_OPTIONS = ("greedy", "prefix", "progress")


def as_batch(texts: str | Sequence[str], name: str = "sentences") -> tuple[list[str], bool]:
    """`texts` as a list, and whether it was a single string.

    Raises:
        ValueError: for anything but a string or a list or tuple of strings, naming `name`
            and the offending entry (`sentences[1] is a int, not a string: 5`).
    """
    if isinstance(texts, str):
        return [texts], True
    if not isinstance(texts, (list, tuple)):
        raise ValueError(f"{name} must be a list or tuple of strings, not {type(texts).__name__}")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"{name}[{index}] is a {type(text).__name__}, not a string: {text!r}")
    return list(texts), False


def check_flag(name: str, value: object) -> None:
    """Refuse a flag that is not a bool (`greedy="no"` is truthy)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} ({value!r}) must be True or False")


@dataclass(frozen=True)
class Request:
    """The checked settings of one call.

    Attributes:
        decode: The decoding settings: the translator's defaults with the call's overrides.
        greedy: Greedy search instead of beam search.
        progress: Show a progress bar on stderr.
        prefix: One target prefix per sentence ("" = none), or None.
    """

    decode: DecodeConfig
    greedy: bool = False
    progress: bool = False
    prefix: list[str] | None = None


def parse_options(
    defaults: DecodeConfig, options: dict, count: int, single: bool, allowed: Sequence[str] = ()
) -> Request:
    """Check a call's keyword options against `defaults`, once.

    Args:
        defaults: The translator's decoding section (the checkpoint's).
        options: The call's keyword arguments (None = not given).
        count: Sentences in the call, for `prefix`.
        single: The call got a single string (then `prefix` is a string too).
        allowed: The option names this call takes; empty = every `DecodeConfig` field and
            `CALL_OPTIONS`.

    Returns:
        The `Request`.

    Raises:
        ValueError: for an option the call does not take (listing those it takes), a setting
            out of range (`DecodeConfig`), a flag that is not a bool, greedy with sampling,
            or a prefix that is not one string per sentence.
    """
    names = list(allowed) or [*DecodeConfig.__dataclass_fields__, *CALL_OPTIONS]
    for name in options:
        if name not in names:
            raise ValueError(f"unknown option {name!r}; this call takes {', '.join(names)}")
    given = dict(options)
    greedy, progress = given.pop("greedy", False), given.pop("progress", False)
    check_flag("greedy", greedy)
    check_flag("progress", progress)
    prefix = _prefixes(given.pop("prefix", None), count, single)
    decode = defaults.override(**given)
    if greedy and decode.sampling:
        raise ValueError("greedy and sampling exclude each other: give one of them")
    return Request(decode=decode, greedy=greedy, progress=progress, prefix=prefix)


def _prefixes(prefix: object, count: int, single: bool) -> list[str] | None:
    """`prefix` as one string per sentence, or None (see `parse_options`)."""
    if prefix is None:
        return None
    if single:
        if not isinstance(prefix, str):
            raise ValueError(f"prefix of a single sentence must be a string, not {prefix!r}")
        return [prefix]
    batch, _ = as_batch(prefix, "prefix")
    if isinstance(prefix, str) or len(batch) != count:
        raise ValueError(
            f"prefix must give one string per sentence ({count}), not {len(batch)}: "
            "use '' for a sentence without one"
        )
    return batch
