"""Shared pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared real-data directory: $TRANSFORMER_DATA_DIR, else `<repo>/../shared/data`.

    Fails (never skips) when it is missing: CI always has it, so a missing directory is a
    broken setup, not a reason to silently test less.
    """
    configured = os.environ.get("TRANSFORMER_DATA_DIR")
    path = (
        Path(configured) if configured else Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    if not (path / "multi30k" / "train.en").is_file():
        pytest.fail(
            f"shared data not found at {path} (expected multi30k/train.en there); set "
            "TRANSFORMER_DATA_DIR to the directory holding multi30k/",
            pytrace=False,
        )
    return path
