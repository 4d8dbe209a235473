"""Tests for transformer/cli/prepare.py (the transformer-prepare command): what it prepares is
what transformer-train then finds, without encoding or training anything again."""

from __future__ import annotations

import re

import numpy as np
import pytest

from transformer.cli.prepare import main
from transformer.config import load_config
from transformer.data.prepare import prepare_data


def test_prepare_then_train_reuses_the_model_and_the_cache(tmp_path, tiny_run, capsys):
    from transformer.cli.train import main as train

    run_dir = tmp_path / "run"
    argv = ["--config", str(tiny_run.config_path), f"train.output_dir={run_dir}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "trained SentencePiece" in out and "train: encoded" in out
    kept = 29000 - int(re.search(r"train: dropped (\d+) of 29000 pairs", out).group(1))
    assert f"prepared the data in {run_dir} in " in out
    assert f"train: {kept:,} of 29,000 pairs kept" in out and "valid: " in out
    assert (run_dir / "spm.model").is_file() and any((run_dir / "cache").iterdir())
    assert not (run_dir / "checkpoint_last.pt").exists()  # nothing trained

    assert train([*argv, *tiny_run.fast, "train.max_steps=1"]) == 0
    logged = capsys.readouterr()
    text = logged.out + logged.err
    assert "reusing SentencePiece model" in text and "train: loaded cached token ids" in text
    assert "trained SentencePiece" not in text and "encoded" not in text


def test_what_it_prepares_equals_a_fresh_preparation(tmp_path, tiny_run):
    run_dir = tmp_path / "run"
    argv = ["--config", str(tiny_run.config_path), f"train.output_dir={run_dir}"]
    assert main(argv) == 0
    config = load_config(tiny_run.config_path, [f"train.output_dir={run_dir}"])
    cached = prepare_data(config.data, run_dir, log=None, build=False)  # from the files only
    fresh = prepare_data(config.data, tmp_path / "fresh", log=None)
    for name in ("src_tokens", "src_offsets", "tgt_tokens", "tgt_offsets"):
        assert np.array_equal(getattr(cached.train, name), getattr(fresh.train, name)), name


def test_a_missing_corpus_is_one_line_and_status_1(tmp_path, tiny_run, capsys):
    argv = ["--config", str(tiny_run.config_path), f"train.output_dir={tmp_path / 'run'}"]
    assert main([*argv, f"data.train={tmp_path / 'nothing'}"]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("transformer-prepare: error: ") and "nothing" in error
    assert "\n" not in error


def test_a_wrong_key_is_a_usage_error(tiny_run, capsys):
    assert main(["--config", str(tiny_run.config_path), "data.vocab_sise=100"]) == 2
    assert "data.vocab_sise" in capsys.readouterr().err


def test_the_json_summary_holds_the_figures_of_the_prepared_data(tmp_path, tiny_run):
    import json

    run_dir = tmp_path / "run"
    argv = ["--config", str(tiny_run.config_path), f"train.output_dir={run_dir}"]
    assert main([*argv, "--json", str(run_dir / "summary.json")]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    config = load_config(tiny_run.config_path, [f"train.output_dir={run_dir}"])
    prepared = prepare_data(config.data, run_dir, log=None, build=False)
    train = summary["splits"]["train"]
    assert train["pairs"] == 29000 and train["kept"] == len(prepared.train)
    assert train["kept"] + train["empty"] + train["too_long"] + train["bad_ratio"] == 29000
    assert train["tgt_tokens"] == sum(len(prepared.train[i][1]) for i in range(len(prepared.train)))
    names = [stage["name"] for stage in summary["stages"]]
    assert names[:3] == ["train: read and count words", names[1], "train: encode"]
    assert names[1].startswith("vocabulary: SentencePiece on ")
    assert summary["peak_mib"] >= max(stage["peak_mib"] for stage in summary["stages"]) > 0


def test_the_json_summary_never_replaces_an_input(tmp_path, tiny_run, capsys):
    run_dir = tmp_path / "run"
    argv = ["--config", str(tiny_run.config_path), f"train.output_dir={run_dir}"]
    assert main(argv) == 0
    model = (run_dir / "spm.model").read_bytes()
    corpus = tiny_run.shared_data / "multi30k" / "val.de"
    (entry,) = (run_dir / "cache").glob("train-*")
    for target in (
        tiny_run.config_path,
        corpus,
        run_dir / "spm.model",
        entry / "summary.json",
        tmp_path,
    ):
        capsys.readouterr()
        assert main([*argv, "--json", str(target)]) == 1, target
        assert "--json" in capsys.readouterr().err
    assert (run_dir / "spm.model").read_bytes() == model


def test_changed_settings_beside_checkpoints_replace_nothing(tmp_path, tiny_run, capsys):
    from transformer.cli.train import main as train

    run_dir = tmp_path / "run"
    argv = ["--config", str(tiny_run.config_path), *tiny_run.fast, f"train.output_dir={run_dir}"]
    assert train([*argv, "train.max_steps=1", "train.save_interval_steps=1"]) == 0
    model = (run_dir / "spm.model").read_bytes()
    capsys.readouterr()
    assert main([*argv[:2], f"train.output_dir={run_dir}", "data.vocab_size=900"]) == 1
    error = capsys.readouterr().err.strip()
    assert "holds checkpoints" in error and "--no-resume" in error and "\n" not in error
    assert (run_dir / "spm.model").read_bytes() == model
    # A fresh start may: the old checkpoints are set aside, the new model trained.
    assert train([*argv, "train.max_steps=1", "data.vocab_size=900", "--no-resume"]) == 0
    assert (run_dir / "spm.model").read_bytes() != model
    assert any(run_dir.glob("previous-*/checkpoint_1.pt"))


def test_sigterm_stops_with_one_line_and_the_next_run_finishes(tmp_path, tiny_run):
    import signal
    import subprocess
    import sys
    import time

    run_dir = tmp_path / "run"
    for lang in ("en", "de"):  # Multi30k 20 times: counting its words takes seconds
        text = (tiny_run.shared_data / "multi30k" / f"train.{lang}").read_text(encoding="utf-8")
        (tmp_path / f"big.{lang}").write_text(text * 20, encoding="utf-8")
    args = ["-m", "transformer.cli.prepare", "--config", str(tiny_run.config_path)]
    args += [f"train.output_dir={run_dir}", f"data.train={tmp_path / 'big'}"]
    env = {**__import__("os").environ, "TRANSFORMER_DATA_DIR": str(tiny_run.shared_data)}
    process = subprocess.Popen(
        [sys.executable, *args], env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    while not (run_dir / "cache").exists() and process.poll() is None:
        time.sleep(0.01)  # stop it while it works on the corpus
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    if process.returncode == 0:
        pytest.skip("finished before the signal arrived")
    assert process.returncode == 128 + signal.SIGTERM  # as transformer-train
    assert err.strip().splitlines()[-1].endswith("interrupted")
    assert "Traceback" not in err
    # Nothing half-written; a run directory left empty is removed.
    cache = run_dir / "cache"
    assert not cache.exists() or not [p for p in cache.iterdir() if not p.name.startswith(".words")]
    assert main(args[2:]) == 0  # the next run prepares it whole
