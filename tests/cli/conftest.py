"""Fixtures of the command-line tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, translation_model, synthetic_tokenizer, write_checkpoint):
    """A checkpoint of `translation_model` over `synthetic_tokenizer` (one per test module;
    tests/cli/test_translate*.py use it, and a module may define its own)."""
    path = tmp_path_factory.mktemp("translate") / "checkpoint.pt"
    write_checkpoint(path, translation_model, synthetic_tokenizer)
    return path
