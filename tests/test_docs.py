"""The docs cannot rot: every code reference in docs/attention.md still names code that holds
the lines it quotes, every image it shows exists, and its "check it yourself" example still runs.

A reference is a link whose text is `path:Symbol` and whose target is the file, e.g.
[`transformer/model/attention.py:MultiHeadAttention.forward`](../transformer/model/attention.py),
followed by a fenced code block whose lines (dedented) are consecutive lines of that function or
class, or by `inline code` on the same line that occurs in it. Symbols are found by name
(`ast`), never by line number, so code may move within its file without breaking the page.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "attention.md"
REFERENCE = re.compile(r"\[`(?P<path>[^`:]+\.py):(?P<symbol>[\w.]+)`\]\(\.\./(?P<target>[^)\s]+)\)")
CODE_LINK = re.compile(r"\]\(\.\./transformer/[^)\s]*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\((?P<path>[^)\s]+)\)")
FENCE = re.compile(r"```python\n(?P<body>.*?)```", re.DOTALL)
INLINE = re.compile(r"\s*[:\u2014-]?\s*`(?P<quote>[^`]+)`")
EXECUTED_MARKER = "<!-- executed by tests/test_docs.py"


def references(text: str) -> list[dict]:
    """Each reference with its quote: path, symbol, doc line, and the block or inline text."""
    found = []
    for match in REFERENCE.finditer(text):
        after = text[match.end() :]
        inline = INLINE.match(after.split("\n", 1)[0])
        block = FENCE.match(after.lstrip("\n"))
        quote, kind = (inline["quote"], "inline") if inline else (None, None)
        if quote is None and block:
            quote, kind = block["body"], "block"
        found.append(
            {
                "path": match["path"],
                "target": match["target"],
                "symbol": match["symbol"],
                "doc_line": text.count("\n", 0, match.start()) + 1,
                "quote": quote,
                "kind": kind,
            }
        )
    return found


def symbol_source(path: Path, symbol: str) -> str | None:
    """The source of `symbol` (`function`, `Class` or `Class.method`) in `path`, or None."""
    source = path.read_text(encoding="utf-8")
    scope: list[ast.stmt] = ast.parse(source).body
    node = None
    for name in symbol.split("."):
        node = next(
            (
                n
                for n in scope
                if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
                and n.name == name
            ),
            None,
        )
        if node is None:
            return None
        scope = node.body
    lines = source.split("\n")
    return "\n".join(lines[node.lineno - 1 : node.end_lineno])


def holds_block(code: str, block: str) -> bool:
    """Whether the dedented `block` equals some run of consecutive lines of `code`, dedented."""
    wanted = textwrap.dedent(block).strip("\n").split("\n")
    lines = code.split("\n")
    for start in range(len(lines) - len(wanted) + 1):
        window = textwrap.dedent("\n".join(lines[start : start + len(wanted)])).split("\n")
        if window == wanted:
            return True
    return False


@pytest.fixture(scope="module")
def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def test_every_code_link_is_a_checked_reference(doc_text):
    refs = references(doc_text)
    assert len(CODE_LINK.findall(doc_text)) == len(refs), "a code link is not in reference form"
    assert len(refs) >= 10
    paths = {ref["path"] for ref in refs}
    model = {"attention.py", "encoder.py", "decoder.py"}
    assert {f"transformer/model/{name}" for name in model} <= paths


def test_references_still_name_code_that_holds_the_quoted_lines(doc_text):
    problems = []
    for ref in references(doc_text):
        where = f"docs/attention.md:{ref['doc_line']} -> {ref['path']}:{ref['symbol']}"
        if ref["target"] != ref["path"]:
            problems.append(f"{where}: links to {ref['target']}, not to {ref['path']}")
            continue
        path = ROOT / ref["path"]
        code = symbol_source(path, ref["symbol"]) if path.is_file() else None
        if code is None:
            problems.append(f"{where}: no such file or symbol")
        elif ref["kind"] is None:
            problems.append(f"{where}: no quoted code after the reference")
        elif ref["kind"] == "inline" and ref["quote"] not in code:
            problems.append(f"{where}: {ref['quote']!r} is not in {ref['symbol']}")
        elif ref["kind"] == "block" and not holds_block(code, ref["quote"]):
            problems.append(
                f"{where}: the quoted block is not in {ref['symbol']}, which reads:\n{code}"
            )
    assert not problems, "\n\n".join(problems)


def test_a_changed_line_is_caught():
    """The check fails when a quote no longer matches (a test of the test)."""
    code = symbol_source(ROOT / "transformer/model/attention.py", "MultiHeadAttention.split_heads")
    assert code is not None and holds_block(code, "B, L, _ = x.shape")
    assert not holds_block(code, "B, L, _ = x.size()")
    assert symbol_source(ROOT / "transformer/model/attention.py", "MultiHeadAttention.nope") is None


def test_images_exist(doc_text):
    missing = [
        m["path"] for m in IMAGE.finditer(doc_text) if not (DOC.parent / m["path"]).is_file()
    ]
    assert not missing


def test_check_it_yourself_example_runs(doc_text, tiny_model, tiny_tokenizer):
    """The example recomputes equation 1 by hand and asserts it equals `attention_weights`."""
    start = doc_text.index(EXECUTED_MARKER)
    block = FENCE.search(doc_text, start)
    assert block is not None
    assert not tiny_model.config.norm_first  # the example is written for the paper's post-norm
    namespace = {"model": tiny_model, "tokenizer": tiny_tokenizer}
    exec(compile(block["body"], str(DOC), "exec"), namespace)
