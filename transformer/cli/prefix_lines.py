"""`transformer-translate --prefix-separator SEP`: input lines `source SEP prefix`.

A line without the separator has no prefix (its whole text is the source). A line where the
separator occurs twice, or where only a near miss of it occurs (its text without the
surrounding spaces: `a|||b` for `' ||| '`), is an error naming the line: it would otherwise
translate the prefix as part of the source, silently.
"""

from __future__ import annotations


def split_prefix_lines(
    lines: list[str], separator: str, name: str, first: int
) -> tuple[list[str], list[str]]:
    """Split each line into its source and its target prefix.

    Args:
        lines: Input lines (without their line ends).
        separator: The `--prefix-separator` (not empty: the command line refuses it).
        name: The input's name for the message ("<stdin>" or the file).
        first: The index of `lines[0]` in the input (0 for the first line).

    Returns:
        (sources, prefixes): a prefix is "" for a line without the separator.

    Raises:
        ValueError: "NAME, line N: ..." for a line with the separator twice or more, or with
            the separator's stripped text but not the separator itself.
    """
    sources, prefixes = [], []
    core = separator.strip()
    for i, line in enumerate(lines):
        parts = line.split(separator)
        where = f"{name}, line {first + i + 1}: --prefix-separator {separator!r}"
        if len(parts) > 2:  # which part would be the prefix?
            raise ValueError(
                f"{where} occurs {len(parts) - 1} times; give one source and one prefix"
            )
        if len(parts) == 1 and core and core != separator and core in line:
            raise ValueError(
                f"{where} does not occur, but {core!r} does: write the separator with its spaces"
            )
        sources.append(parts[0])
        prefixes.append(parts[1] if len(parts) == 2 else "")
    return sources, prefixes
