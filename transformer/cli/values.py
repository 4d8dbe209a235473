"""The types of the console scripts' option values (argparse `type=`): each refuses what the
config would refuse too, so that one rule holds on the command line and in the YAML file, and
argparse reports it naming the option (exit status 2, `transformer.cli.common`).
"""

from __future__ import annotations

import argparse


def file_name(value: str) -> str:
    """argparse `type` of every file option: refuses the empty string, which would otherwise
    read as the option not given (`--output ""` writing stdout) or as the current directory.

    Raises:
        argparse.ArgumentTypeError: for "" (argparse prints it naming the option; status 2).
    """
    if value == "":
        raise argparse.ArgumentTypeError("an empty string is not a file name")
    return value


def integer(value: str) -> int:
    """argparse `type` of the integer options: `int`, but of ASCII digits only, as in the
    config (YAML), where `int` alone takes any script's digits ("٤" as 4).

    Raises:
        argparse.ArgumentTypeError: "invalid int value: '...'" (argparse names the option).
    """
    return _ascii(value, int)


def number(value: str) -> float:
    """argparse `type` of the real-valued options: `float` of ASCII text only (see `integer`).

    Raises:
        argparse.ArgumentTypeError: "invalid float value: '...'" (argparse names the option).
    """
    return _ascii(value, float)


def _ascii(value: str, convert: type[int] | type[float]) -> int | float:
    """`convert(value)` for ASCII text; argparse's "invalid <type> value" error otherwise."""
    try:
        if value.isascii():
            return convert(value)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"invalid {convert.__name__} value: {value!r}")


def sentence(value: str) -> str:
    """argparse `type` of an option that takes a sentence as text (`--src "..."`): refuses
    bytes that are not UTF-8, which Python keeps from the command line as lone surrogates
    (PEP 383) and SentencePiece cannot encode.

    Raises:
        argparse.ArgumentTypeError: naming the first bad byte (argparse names the option;
            status 2).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        code = ord(value[error.start])
        bad = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        raise argparse.ArgumentTypeError(
            f"not valid UTF-8 ({bad} at character {error.start + 1}); give the sentence in UTF-8"
        ) from None
    return value
