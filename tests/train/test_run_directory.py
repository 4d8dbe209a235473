"""Tests for transformer/train/run_directory.py: creating the run directory."""

from __future__ import annotations

import pytest

from transformer.train.run_directory import RunDirectory


def test_create_makes_parents_and_names_train_output_dir_when_it_cannot(tmp_path):
    RunDirectory(tmp_path / "a" / "b").create()
    assert (tmp_path / "a" / "b").is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match=r"train\.output_dir \(.*file/run\) cannot be created"):
        RunDirectory(blocker / "run").create()
