"""The package's layout keeps its promises: folders by concern, short files, imports downward.

- `transformer/model/` imports only the standard library, torch and itself (a student reads it
  alone, like Figure 1);
- nothing outside `transformer/cli/` imports from it (console scripts sit on top; the
  `__main__.py` entry points are console scripts too);
- no module of the package, `scripts/` or `benchmarks/` is longer than 300 lines;
- tests mirror the package: `tests/<concern>/test_<module>.py` tests
  `transformer/<concern>/<module>.py`.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "transformer"
MODULES = sorted(PACKAGE.rglob("*.py"))
# The commands beside the package: read as often as it, and held to the same length.
TOOLS = sorted([*(ROOT / "scripts").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")])
CONCERNS = ("model", "data", "train", "decode", "evaluate", "cli", "cpu", "export")


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports (absolute names; `from x import y` gives x and x.y)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_folders_are_the_concerns():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(CONCERNS)
    for concern in CONCERNS:
        assert (PACKAGE / concern / "__init__.py").is_file()


def test_the_model_imports_only_torch_the_standard_library_and_itself():
    allowed = set(sys.stdlib_module_names) | {"torch", "__future__"}
    problems = []
    for path in sorted((PACKAGE / "model").glob("*.py")):
        for name in imported_modules(path):
            top = name.split(".")[0]
            if top == "transformer" and not name.startswith("transformer.model"):
                problems.append(f"{relative(path)} imports {name}")
            elif top != "transformer" and top not in allowed:
                problems.append(f"{relative(path)} imports {name}")
    assert not problems, "\n".join(problems)


def test_nothing_outside_cli_imports_from_it():
    problems = [
        f"{relative(path)} imports {name}"
        for path in MODULES
        if "cli" not in path.relative_to(PACKAGE).parts and path.name != "__main__.py"
        for name in imported_modules(path)
        if name.startswith("transformer.cli")
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", MODULES + TOOLS, ids=relative)
def test_no_module_is_over_300_lines(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= 300, f"{relative(path)} has {lines} lines"


def test_every_module_has_a_test_file_in_the_mirrored_place():
    """`transformer/a/b.py` is tested by `tests/a/test_b.py` (package files and __main__ aside)."""
    missing = []
    for path in MODULES:
        if path.name in ("__init__.py", "__main__.py"):
            continue
        mirror = ROOT / "tests" / path.relative_to(PACKAGE).parent / f"test_{path.name}"
        if not mirror.is_file():
            missing.append(f"{relative(path)} -> {relative(mirror)}")
    assert not missing, "no mirrored test file:\n" + "\n".join(missing)
