"""Tests for transformer/export/extra.py: the optional `export` extra, imported on demand."""

from __future__ import annotations

import sys

import pytest

from transformer.export.extra import EXPORT_PACKAGES, MissingExtraError, import_extra


def test_an_installed_package_is_returned():
    assert import_extra("json") is sys.modules["json"]


def test_a_missing_package_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import now raises ImportError
    with pytest.raises(MissingExtraError) as caught:
        import_extra("ctranslate2")
    message = str(caught.value)
    assert "\n" not in message
    assert "'export' extra" in message and "ctranslate2 is not installed" in message
    assert 'pip install -e ".[export]"' in message
    assert isinstance(caught.value, ImportError)


def test_the_extra_lists_the_packages_pyproject_installs():
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    extra = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["export"]
    names = {requirement.split(">")[0].split("=")[0].strip() for requirement in extra}
    assert set(EXPORT_PACKAGES.values()) <= names
