"""A config value checked against its field's type: YAML's forms in, the field's type out.

`transformer.config` builds each section's dataclass from YAML through `coerce`, so a wrong
type is one message naming the key wherever the value came from (a file, an override, a
checkpoint).
"""

from __future__ import annotations

import math
import re
import types
import typing

# Floats PyYAML reads as strings: exponents without a dot (1e-9), and `inf` (YAML's is `.inf`).
_FLOAT_TEXT = re.compile(r"[-+]?((\d+\.?\d*|\.\d+)[eE][-+]?\d+|inf|infinity)", re.IGNORECASE)


def coerce(value: object, annotation: object, key: str) -> object:
    """Check `value` against a config dataclass's field type, converting YAML's forms.

    Args:
        value: What YAML read: a number, string, bool, list or None.
        annotation: The field's type: int, float, bool, str, a tuple of them, or `X | None`.
        key: The config key (`section.name`), for the error.

    Returns:
        The value as the field holds it: an int for a float field becomes a float, a list a
        tuple, and `1e-9` or `inf` (strings to YAML) floats.

    Raises:
        ValueError: naming the key, the expected type ("float or null") and the value; also
            for NaN (YAML's `.nan`), which no setting means, and an int beyond 64 bits.
    """
    if isinstance(value, float) and math.isnan(value):
        # YAML's .nan: no setting means "not a number", and it slips past range checks.
        raise ValueError(f"config key {key}: expected a number, got .nan (not a number)")
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return coerce(value, option, key)
            except _OutOfRange:
                raise
            except ValueError:
                continue
        raise _wrong_type(value, annotation, key)
    if origin is tuple:
        args = typing.get_args(annotation)
        if not isinstance(value, list | tuple) or len(value) != len(args):
            raise ValueError(
                f"config key {key}: expected a list of {len(args)} values, got {value!r}"
            )
        return tuple(coerce(v, a, key) for v, a in zip(value, args, strict=True))
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if annotation in (bool, str) and isinstance(value, annotation):
        return value
    if annotation is int and number and isinstance(value, int):
        if not -(2**63) <= value < 2**63:  # torch's sizes and counters are 64-bit
            raise _OutOfRange(f"config key {key}: {value} is out of range (at most 2**63 - 1)")
        return value
    spelled = isinstance(value, str) and _FLOAT_TEXT.fullmatch(value.strip())
    if annotation is float and (number or spelled):
        return float(value)
    raise _wrong_type(value, annotation, key)


def _wrong_type(value: object, annotation: object, key: str) -> ValueError:
    """The error for a value of the wrong type; for a word YAML made a boolean, how to fix it."""
    message = f"config key {key}: expected {_type_name(annotation)}, got {value!r}"
    message += f" ({type(value).__name__})"
    if isinstance(value, bool) and str in (typing.get_args(annotation) or (annotation,)):
        # YAML 1.1, PyYAML's: data.source_lang=no (Norwegian) arrives as False.
        message += "; YAML reads yes/no/on/off as booleans: quote the word, e.g. 'no'"
    return ValueError(message)


class _OutOfRange(ValueError):
    """A value of the right type beyond its range: the message to show, even in a union."""


def _type_name(annotation: object) -> str:
    """A field type as a user reads it: `float | None` is "float or null"."""
    options = typing.get_args(annotation) or (annotation,)
    names = [
        "null" if option is type(None) else getattr(option, "__name__", str(option))
        for option in options
    ]
    return " or ".join(names)
