"""Tests for benchmarks/decoding_features.py: both measurements run and report every mode."""

from __future__ import annotations

import json

import pytest

from benchmarks import decoding_features


def test_throughput_and_streaming_report_every_mode(
    tmp_path, capsys, shared_data, monkeypatch, make_model, tiny_tokenizer, write_checkpoint
):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    checkpoint = write_checkpoint(tmp_path / "c.pt", make_model(60), tiny_tokenizer)
    argv = ["--checkpoint", str(checkpoint), "--sentences", "6", "--batch-size", "3"]
    argv += ["--length", "2", "--rounds", "1", "--threads", "1", "--stream-lines", "30", "60"]
    assert decoding_features.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    modes = result["throughput"]
    assert {"greedy", "sampling", "scoring", "beam 4", "sampling top-p=0.9 (peaked)"} <= set(modes)
    assert modes["greedy"]["relative_to_greedy"] == 1.0
    assert all(mode["sentences_per_second"] > 0 for mode in modes.values())
    assert set(result["streaming"]) == {"30", "60", "60 (one chunk: --buffer-size 60)"}
    assert all(run["peak_rss_mib"] > 0 for run in result["streaming"].values())


def test_vocab_size_is_for_the_random_model_only(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        decoding_features.main(["--checkpoint", str(tmp_path / "c.pt"), "--vocab-size", "32000"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.endswith(
        "error: --vocab-size sizes the random model: at least 8000, without --checkpoint"
    )
