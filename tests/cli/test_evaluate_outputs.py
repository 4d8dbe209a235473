"""Tests for transformer/cli/evaluate_outputs.py: transformer-evaluate's default file names.

References: the names written out by hand; a file system's 255-byte limit on a name.
"""

from __future__ import annotations

from pathlib import Path

from transformer.cli.evaluate_outputs import MAX_STEM, ensemble_stem


def test_an_ensemble_is_named_after_every_member(tmp_path):
    run2 = tmp_path / "run2"
    run2.mkdir()
    assert ensemble_stem([tmp_path / "avg.pt"]) == "avg"
    assert ensemble_stem([tmp_path / "a.pt", tmp_path / "b.pt"]) == "a+b"
    assert ensemble_stem([tmp_path / "avg.pt", run2 / "avg.pt"]) == "avg+run2_avg"
    # The same directory written another way is the same directory.
    assert ensemble_stem([tmp_path / "a.pt", run2 / ".." / "b.pt"]) == "a+b"


def test_a_long_ensemble_name_stays_a_valid_file_name_and_apart_from_another(tmp_path):
    """Eight members named `checkpoint_avg10_of_run_<i>` (27 characters) would give a stem of
    223 characters, more than a file name's 255 bytes once the test set's name is added."""
    members = [tmp_path / f"checkpoint_avg10_of_run_{i}.pt" for i in range(8)]
    stem = ensemble_stem(members)
    assert len(stem.encode()) <= MAX_STEM
    assert stem.startswith("checkpoint_avg10_of_run_0+7more-")
    other = ensemble_stem([*members[:7], tmp_path / "checkpoint_avg10_of_run_9.pt"])
    assert other.startswith("checkpoint_avg10_of_run_0+7more-") and other != stem
    name = f"{stem}.wmt14_full.en-de.hyp.de"
    assert len(name.encode()) < 255 and Path(tmp_path / name).touch() is None
