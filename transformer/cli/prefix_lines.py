"""`transformer-translate --prefix-separator SEP`: input lines `source SEP prefix`.

A line without the separator has no prefix (its whole text is the source). An error names the
line where the separator occurs twice, or where a prefix follows an empty source (there is
nothing to translate): either would lose the prefix, or translate it as source, silently. A
warning names a line that holds only a near miss of the separator, its text without the
surrounding spaces (`a|||b` for `' ||| '`), when that text is two or more symbols (`|||`, `--`;
not `-`): the line is translated whole. Text can hold such symbols (`well--known`, `waits...`),
so this is no error.
"""

from __future__ import annotations

import sys


def split_prefix_lines(
    lines: list[str], separator: str, name: str, first: int, prog: str
) -> tuple[list[str], list[str]]:
    """Split each line into its source and its target prefix.

    Args:
        lines: Input lines (without their line ends).
        separator: The `--prefix-separator` (not empty: the command line refuses it).
        name: The input's name for the message ("<stdin>" or the file).
        first: The index of `lines[0]` in the input (0 for the first line).
        prog: The command, starting the warnings on stderr.

    Returns:
        (sources, prefixes): a prefix is "" for a line without the separator.

    Raises:
        ValueError: "NAME, line N: ..." for a line with the separator twice or more, or a
            prefix after an empty source.
    """
    sources, prefixes = [], []
    core = separator.strip()
    near_miss = core != separator and len(core) > 1 and not any(c.isalnum() for c in core)
    for i, line in enumerate(lines):
        parts = line.split(separator)
        where = f"{name}, line {first + i + 1}: --prefix-separator {separator!r}"
        if len(parts) > 2:  # which part would be the prefix?
            raise ValueError(
                f"{where} occurs {len(parts) - 1} times; give one source and one prefix"
            )
        if len(parts) == 1 and near_miss and core in line:
            print(
                f"{prog}: warning: {where} does not occur, but {core!r} does: the line is "
                "translated whole, without a prefix (write the separator with its spaces)",
                file=sys.stderr,
            )
        if len(parts) == 2 and not parts[0].strip() and parts[1].strip():
            raise ValueError(f"{where} has a prefix but no source before it")
        sources.append(parts[0])
        prefixes.append(parts[1] if len(parts) == 2 else "")
    return sources, prefixes
