"""Shared fixtures of the scripts' tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def checkpoints_in_tmp(tmp_path, monkeypatch):
    """The quickstart's run directories (`checkpoints/<name>`, made before training even when
    a test stops it there) go to this test's folder, never into the repository."""
    from scripts import quickstart

    monkeypatch.setattr(quickstart, "CHECKPOINTS", tmp_path / "checkpoints")
    return tmp_path / "checkpoints"
