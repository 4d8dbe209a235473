"""Line streams translated chunk by chunk, in input order, in constant memory.

`transformer-translate` reads its input lazily (`read_lines_lazily`), cuts it into chunks of
at most `chunk_lines` lines (`chunks`), translates each chunk as one `Translator` call (sorted
and batched by length inside the chunk) and writes the chunk's output lines before reading the
next: a file of a million lines never sits in memory and its first lines come out while the
rest is still being read. Output line i always belongs to input line i. From a terminal the
chunks are single lines, each translated as soon as it is entered (a prompt on stderr, as
`fairseq-interactive` does).

Lines follow the rules of `transformer.data.corpus.read_lines`: only "\\n" separates lines
("\\r\\n" is accepted), a leading byte-order mark is dropped, invalid UTF-8 is an error naming
the line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import BinaryIO, TextIO

BOM = "\ufeff"


def read_lines_lazily(
    stream: BinaryIO, name: str, prompt: str | None = None, prompt_to: TextIO | None = None
) -> Iterator[str]:
    """The UTF-8 lines of a binary stream, one at a time, without line endings.

    Args:
        stream: An open binary file or pipe (`sys.stdin.buffer`).
        name: How messages name it ("<stdin>", a path).
        prompt: Written (and flushed) before each line is read, for a terminal; None: none.
        prompt_to: Where the prompt goes (default: stderr, so that stdout stays the output).

    Yields:
        Each line as it becomes available.

    Raises:
        ValueError: `<stdin>: line 2 is not valid UTF-8 (...)`.
    """
    prompt_to = prompt_to or sys.stderr
    number = 0
    while True:
        if prompt is not None:
            prompt_to.write(prompt)
            prompt_to.flush()
        raw = stream.readline()  # up to and including b"\n": never a read-ahead of the file
        if not raw:
            if prompt is not None:  # end of input (Ctrl-D): end the prompt's line
                prompt_to.write("\n")
            return
        number += 1
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{name}: line {number} is not valid UTF-8 ({error.reason} at byte "
                f"{error.start} of the line)"
            ) from error
        if number == 1 and line.startswith(BOM):
            line = line[1:]
        line = line[:-1] if line.endswith("\n") else line
        yield line[:-1] if line.endswith("\r") else line


def chunks(lines: Iterable[str], chunk_lines: int) -> Iterator[list[str]]:
    """Consecutive lists of at most `chunk_lines` lines (the last may be shorter)."""
    iterator = iter(lines)
    while chunk := list(islice(iterator, chunk_lines)):
        yield chunk


def translate_stream(
    lines: Iterable[str],
    translate: Callable[[list[str], int], list[str]],
    chunk_lines: int,
    write: Callable[[str], object],
) -> int:
    """Translate `lines` chunk by chunk and write each chunk's output before reading on.

    Args:
        lines: The input lines (read lazily).
        translate: (chunk, index of its first line) -> the output text of the chunk's lines,
            one string per input line (which may hold several lines, e.g. an n-best list).
        chunk_lines: Lines per chunk (1 for interactive use).
        write: Called once per chunk with its output lines, each ending in "\\n".

    Returns:
        The number of input lines.
    """
    done = 0
    for chunk in chunks(lines, chunk_lines):
        write("".join(text + "\n" for text in translate(chunk, done)))
        done += len(chunk)
    return done
