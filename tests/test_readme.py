"""Keep README.md true: every config key is documented, and CI runs the README's test command."""

import dataclasses
import re
from pathlib import Path

import pytest

from transformer.data.config import DataConfig
from transformer.decode.config import DecodeConfig
from transformer.model.config import ModelConfig
from transformer.train.config import TrainConfig

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "section, cls",
    [
        ("model", ModelConfig),
        ("data", DataConfig),
        ("train", TrainConfig),
        ("decode", DecodeConfig),
    ],
)
def test_every_config_key_is_in_the_reference(section, cls):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith(f"| `{section}.")]
    documented = set()
    for row in rows:
        names = re.findall(r"`(?:\w+\.)?(\w+)`", row.split("|")[1])
        documented.update(names)
    missing = [f.name for f in dataclasses.fields(cls) if f.name not in documented]
    assert not missing, f"README config reference lacks {section}: {missing}"


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test\b", readme, re.MULTILINE)
    assert re.search(r"^make test\s*$", ci, re.MULTILINE)
    assert "torch==2.13.0" in ci


def test_make_demo_runs_a_script_that_exists():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    scripts = re.findall(r"scripts/[\w./-]+", recipe)
    assert scripts, recipe
    assert all((REPO / path).is_file() for path in scripts), scripts


def test_readme_python_api_example_is_valid_python():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    assert blocks
    for block in blocks:
        compile(block, "README.md", "exec")
