"""Shared pytest fixtures: real data, small tokenizers and models, checkpoints, training runs.

Helpers that several test files need are fixtures (a fixture may return a function), so that
no test module imports another and each small model or tokenizer is built in one place. The
shared data is here; the other fixtures every folder uses are in tests/fixtures/, one module
per kind, loaded below; a fixture that only one folder uses is in that folder's conftest.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = [
    "tests.fixtures.tokenizers",  # tiny_tokenizer, synthetic_sentences, synthetic_tokenizer
    "tests.fixtures.models",  # model_config, make_model, make_search_model, random_batch, ...
    "tests.fixtures.checkpoints",  # checkpoint_state, write_checkpoint, write_filled_checkpoint
    "tests.fixtures.runs",  # tiny_run
    "tests.fixtures.offline",  # hub_offline
    "tests.fixtures.signals",  # foreground_signals
]

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared real-data directory: $TRANSFORMER_DATA_DIR, else `<repo>/../shared/data`.

    Fails (never skips) when it is missing: CI always has it, so a missing directory is a
    broken setup, not a reason to silently test less.
    """
    configured = os.environ.get("TRANSFORMER_DATA_DIR")
    path = Path(configured) if configured else REPO.parent / "shared" / "data"
    if not (path / "multi30k" / "train.en").is_file():
        pytest.fail(
            f"shared data not found at {path} (expected multi30k/train.en there); set "
            "TRANSFORMER_DATA_DIR to the directory holding multi30k/",
            pytrace=False,
        )
    return path
