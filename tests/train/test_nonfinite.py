"""Tests for transformer/train/nonfinite.py: skipped updates are counted, and the error names
the step and the kept checkpoint (the trainer-level behaviour is in test_trainer.py)."""

from __future__ import annotations

import pytest

from transformer.train.config import TrainConfig
from transformer.train.nonfinite import (
    MAX_CONSECUTIVE_SKIPS,
    NonFiniteLossError,
    handle_nonfinite,
)
from transformer.train.state import TrainState
from transformer.train.update import UpdateResult

NAN = UpdateResult(float("nan"), float("nan"), 10, [False, False])


def test_skipping_counts_until_too_many_in_a_row(tmp_path):
    state, logged = TrainState(step=4), []
    train = TrainConfig(skip_nonfinite=True)
    handle_nonfinite(NAN, 1, state, train, tmp_path / "last.pt", logged.append)
    assert state.skipped_updates == 1 and "at step 5: update skipped" in logged[0]
    with pytest.raises(NonFiniteLossError, match=f"{MAX_CONSECUTIVE_SKIPS} non-finite updates"):
        handle_nonfinite(NAN, MAX_CONSECUTIVE_SKIPS, state, train, tmp_path / "l.pt", print)


def test_without_skipping_the_error_names_the_kept_checkpoint(tmp_path):
    last = tmp_path / "checkpoint_last.pt"
    last.write_bytes(b"x")
    with pytest.raises(NonFiniteLossError, match=rf"step 3; .*{last} is kept.*skip_nonfinite"):
        handle_nonfinite(NAN, 1, TrainState(step=2), TrainConfig(), last, print)
