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


def test_remove_if_empty_removes_empty_folders_and_never_a_file(tmp_path):
    run = RunDirectory(tmp_path / "run")
    (run.path / "cache" / "entry").mkdir(parents=True)
    assert run.remove_if_empty() and not run.path.exists()
    assert not run.remove_if_empty()  # already gone
    (run.path / "cache").mkdir(parents=True)
    (run.path / "cache" / "kept.bin").write_bytes(b"x")
    (run.path / "empty").mkdir()
    assert not run.remove_if_empty()
    assert (run.path / "cache" / "kept.bin").read_bytes() == b"x"
