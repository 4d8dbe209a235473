"""Tests for transformer/decode/stream.py: lazy lines, chunks, in-order streaming.

References: `transformer.data.corpus.decode_lines` (the whole-file reader with the same rules)
and `wc -l`-style counting by hand.
"""

from __future__ import annotations

import io

import pytest

from transformer.data.corpus import count_lines, decode_lines
from transformer.decode.stream import chunks, read_lines_lazily, translate_stream

DATA = [
    b"a man\nb\r\n\n  \nlast",
    b"\xef\xbb\xbfwith a bom\nsecond\n",
    b"one line\n",
    b"",
    "Umlaut \u00e4\u2028inside\n".encode(),
]


@pytest.mark.parametrize("data", DATA)
def test_lazy_lines_are_the_whole_file_readers_lines(data, tmp_path):
    assert list(read_lines_lazily(io.BytesIO(data), "x")) == decode_lines(data, "x")
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    assert count_lines(str(path)) == len(decode_lines(data, "x"))


def test_invalid_utf8_names_the_line_and_a_prompt_goes_before_each_read():
    with pytest.raises(ValueError, match=r"^<stdin>: line 2 is not valid UTF-8 \(invalid start"):
        list(read_lines_lazily(io.BytesIO(b"ok\nbad \xff\n"), "<stdin>"))
    prompts = io.StringIO()
    lines = list(read_lines_lazily(io.BytesIO(b"a\nb\n"), "t", prompt="> ", prompt_to=prompts))
    assert lines == ["a", "b"] and prompts.getvalue() == "> > > \n"  # the last one at EOF


def test_chunks_and_in_order_streaming():
    assert list(chunks(iter(range(7)), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(chunks([], 3)) == []
    written, calls = [], []

    def translate(lines, first):
        calls.append((first, len(lines)))
        return [line.upper() for line in lines]

    assert translate_stream(iter("abcde"), translate, 2, written.append) == 5
    assert calls == [(0, 2), (2, 2), (4, 1)]
    assert "".join(written) == "A\nB\nC\nD\nE\n" and len(written) == 3  # one write per chunk
