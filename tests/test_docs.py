"""The docs cannot rot: every code reference in docs/attention.md still points at the lines it
quotes, every image it shows exists, and its "check it yourself" example still runs.

A reference is a link whose text and target are the same `path#La-Lb` (e.g.
[`transformer/attention.py#L71`](../transformer/attention.py#L71)), followed by a fenced code
block holding exactly those lines (dedented), or by `inline code` on the same line that occurs
in them. The reference is the repository's files themselves.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.evaluate.test_attention_maps import tiny_model, tiny_tokenizer

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "attention.md"
REFERENCE = re.compile(
    r"\[`(?P<text>[^`]+)`\]\(\.\./(?P<path>[^)#\s]+)#L(?P<first>\d+)(?:-L(?P<last>\d+))?\)"
)
LINK_TO_LINES = re.compile(r"\]\([^)\s]*#L\d+[^)]*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\((?P<path>[^)\s]+)\)")
FENCE = re.compile(r"```python\n(?P<body>.*?)```", re.DOTALL)
INLINE = re.compile(r"\s*[:\u2014-]?\s*`(?P<quote>[^`]+)`")
EXECUTED_MARKER = "<!-- executed by tests/test_docs.py"


def references(text: str) -> list[dict]:
    """Each reference with its quote: path, first/last line (1-based), and block or inline text."""
    found = []
    for match in REFERENCE.finditer(text):
        first = int(match["first"])
        last = int(match["last"] or first)
        line_of = text.count("\n", 0, match.start()) + 1
        after = text[match.end() :]
        inline = INLINE.match(after.split("\n", 1)[0])
        block = FENCE.match(after.lstrip("\n"))
        quote, kind = (inline["quote"], "inline") if inline else (None, None)
        if quote is None and block:
            quote, kind = block["body"], "block"
        found.append(
            {
                "text": match["text"],
                "path": match["path"],
                "first": first,
                "last": last,
                "doc_line": line_of,
                "quote": quote,
                "kind": kind,
            }
        )
    return found


@pytest.fixture(scope="module")
def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def test_every_link_to_lines_is_a_checked_reference(doc_text):
    refs = references(doc_text)
    assert len(LINK_TO_LINES.findall(doc_text)) == len(refs), "a #L link is not in reference form"
    assert len(refs) >= 10
    paths = {ref["path"] for ref in refs}
    assert {"transformer/attention.py", "transformer/encoder.py", "transformer/decoder.py"} <= paths


def test_references_still_point_at_the_quoted_lines(doc_text):
    problems = []
    for ref in references(doc_text):
        where = f"docs/attention.md:{ref['doc_line']} -> {ref['path']}#L{ref['first']}"
        anchor = f"{ref['path']}#L{ref['first']}" + (
            f"-L{ref['last']}" if ref["last"] != ref["first"] else ""
        )
        source = ROOT / ref["path"]
        if ref["text"] != anchor:
            problems.append(f"{where}: link text {ref['text']!r} differs from target {anchor!r}")
            continue
        if not source.is_file():
            problems.append(f"{where}: no such file")
            continue
        lines = source.read_text(encoding="utf-8").split("\n")
        if not 1 <= ref["first"] <= ref["last"] <= len(lines):
            problems.append(f"{where}: lines out of range (file has {len(lines)})")
            continue
        cited = "\n".join(lines[ref["first"] - 1 : ref["last"]])
        if ref["kind"] is None:
            problems.append(f"{where}: no quoted code after the reference")
        elif ref["kind"] == "inline" and ref["quote"] not in cited:
            problems.append(f"{where}: {ref['quote']!r} is not in the cited lines:\n{cited}")
        elif ref["kind"] == "block":
            expected = textwrap.dedent(cited).strip("\n")
            if textwrap.dedent(ref["quote"]).strip("\n") != expected:
                problems.append(
                    f"{where}: the quoted block differs; the lines now read:\n{expected}"
                )
    assert not problems, "\n\n".join(problems)


def test_images_exist(doc_text):
    missing = [
        m["path"] for m in IMAGE.finditer(doc_text) if not (DOC.parent / m["path"]).is_file()
    ]
    assert not missing


def test_check_it_yourself_example_runs(doc_text):
    """The example recomputes equation 1 by hand and asserts it equals `attention_weights`."""
    start = doc_text.index(EXECUTED_MARKER)
    block = FENCE.search(doc_text, start)
    assert block is not None
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer.vocab_size)
    assert not model.config.norm_first  # the example is written for the paper's post-norm
    exec(compile(block["body"], str(DOC), "exec"), {"model": model, "tokenizer": tokenizer})
