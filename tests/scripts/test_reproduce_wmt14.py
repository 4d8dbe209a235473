"""Plumbing tests for scripts/reproduce_wmt14.sh and scripts/quickstart.py.

They run the real scripts end to end (train a few steps, average, decode, score) on local
files from ../shared/data, so the commands a user with GPUs runs cannot rot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "model.d_model=32",
    "model.d_ff=64",
    "model.n_heads=2",
    "model.n_encoder_layers=1",
    "model.n_decoder_layers=1",
    "data.vocab_size=400",
    "train.device=cpu",
    "train.precision=fp32",
    "train.max_tokens=1024",
    "train.tokens_per_update=null",
    "train.max_steps=6",
    "train.save_interval_steps=1",
    "train.save_interval_minutes=null",
    "train.warmup_steps=4",
    "train.validate_interval_steps=3",
    "train.valid_bleu_sentences=8",
    "train.log_interval_steps=2",
    "train.num_threads=1",
    "decode.max_len_b=5",
]


def _head(source: Path, target: Path, lines: int) -> None:
    target.write_text(
        "".join(source.read_text(encoding="utf-8").splitlines(keepends=True)[:lines]),
        encoding="utf-8",
    )


@pytest.mark.slow
def test_reproduce_wmt14_plumbing(tmp_path, shared_data):
    for lang in ("en", "de"):
        _head(shared_data / f"wmt14-en-de/newstest2014.{lang}", tmp_path / f"test.{lang}", 20)
        _head(shared_data / f"wmt14-en-de/newstest2013.{lang}", tmp_path / f"valid.{lang}", 30)
    run_dir = tmp_path / "run"
    env = {
        **os.environ,
        "NGPUS": "1",
        "RUN_DIR": str(run_dir),
        "PYTHON": sys.executable,
        "TEST_SRC": str(tmp_path / "test.en"),
        "TEST_REF": str(tmp_path / "test.de"),
        "TRANSFORMER_DATA_DIR": str(shared_data),
        "OMP_NUM_THREADS": "1",
    }
    overrides = [
        "data.train=newstest-2008-2012-en-de/newssyscomb2009",
        f"data.valid={tmp_path / 'valid'}",
        *TINY,
    ]
    result = subprocess.run(
        ["bash", str(REPO / "scripts/reproduce_wmt14.sh"), "base", *overrides],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (run_dir / "checkpoint_avg5.pt").is_file()
    hyps = (run_dir / "newstest2014.hyp.de").read_text(encoding="utf-8").splitlines()
    assert len(hyps) == 20
    scores = json.loads((run_dir / "newstest2014.json").read_text())["scores"]
    assert {"bleu", "chrf", "tokenized_bleu"} <= scores.keys()


def test_reproduce_wmt14_rejects_unknown_size():
    result = subprocess.run(
        ["bash", str(REPO / "scripts/reproduce_wmt14.sh"), "huge"], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "usage" in result.stderr


@pytest.mark.slow
def test_quickstart_end_to_end_with_a_relative_data_dir(tmp_path, shared_data, monkeypatch):
    """A changed job (overrides) honours data.test and leaves the recorded results/ alone."""
    for lang in ("en", "de"):
        _head(shared_data / f"multi30k/test_2016_flickr.{lang}", tmp_path / f"mini.{lang}", 12)
    recorded = {p: p.stat().st_mtime_ns for p in (REPO / "results").glob("multi30k_*")}
    env = {
        **os.environ,
        "TRANSFORMER_DATA_DIR": os.path.relpath(shared_data, REPO),  # relative, as in the README
        "OMP_NUM_THREADS": "1",
    }
    run_dir = tmp_path / "run"
    command = [
        sys.executable,
        str(REPO / "scripts/quickstart.py"),
        "--run-dir",
        str(run_dir),
        *TINY,
        "train.validate_interval_steps=0",
        f"data.test={tmp_path / 'mini'}",
        f"data.valid={tmp_path / 'mini'}",
    ]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    hyp = run_dir / "multi30k_en-de.mini.hyp.de"
    assert len(hyp.read_text(encoding="utf-8").splitlines()) == 12
    result = json.loads((run_dir / "multi30k_en-de.mini.json").read_text())
    assert result["test_set"].endswith("mini (12 sentences)")
    # The average and beam size were chosen on the validation set: 6 checkpoints, so the last 5,
    # all 6 and the last one alone, each with beam 4 and 6; the test set was decoded with the
    # best of the six.
    rows = result["validation"]["bleu"]
    pairs = [(r["average_last"], r["beam_size"]) for r in rows]
    assert pairs == [(5, 4), (5, 6), (6, 4), (6, 6), (1, 4), (1, 6)]
    (chosen,) = [r for r in rows if r["chosen"]]
    assert chosen["bleu"] == max(r["bleu"] for r in rows)
    assert result["checkpoint"]["averaged_last"] == chosen["average_last"]
    assert result["decoding"]["beam_size"] == chosen["beam_size"]
    assert (run_dir / "multi30k_en-de.mini.scores.json").is_file()
    assert {p: p.stat().st_mtime_ns for p in (REPO / "results").glob("multi30k_*")} == recorded
    # A mistyped test set fails before any training, naming the file.
    typo = [*command[:-1], f"data.test={tmp_path / 'nope'}", "--run-dir", str(tmp_path / "r2")]
    done = subprocess.run(typo, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "file not found" in done.stderr
    assert not (tmp_path / "r2").exists()


STUB_PYTHON = """#!/usr/bin/env bash
# Stands in for $PYTHON: answers the GPU count, logs every other command line.
if [ "$1" = "-c" ]; then echo 3; exit 0; fi
echo "$*" >> "$STUB_LOG"
"""


def test_the_script_prepares_first_then_runs_torchrun_of_its_python_on_every_visible_gpu(
    tmp_path,
):
    """The GPU count comes from $PYTHON's torch (which honours CUDA_VISIBLE_DEVICES, unlike
    `nvidia-smi -L`), torchrun is `$PYTHON -m torch.distributed.run` (not whatever torchrun
    is on PATH), and the data are prepared before any training process starts."""
    stub, log = tmp_path / "python", tmp_path / "calls.log"
    stub.write_text(STUB_PYTHON)
    stub.chmod(0o755)
    env = {**os.environ, "PYTHON": str(stub), "STUB_LOG": str(log), "RUN_DIR": "r"}
    env.pop("NGPUS", None)
    result = subprocess.run(
        ["bash", str(REPO / "scripts/reproduce_wmt14.sh"), "base", "train.seed=3"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    config = "--config configs/base.yaml train.output_dir=r train.keep_last=5 train.seed=3"
    assert calls[0] == f"-m transformer prepare {config}"
    assert calls[1] == (
        f"-m torch.distributed.run --standalone --nproc_per_node 3 -m transformer.train {config}"
    )
    assert calls[2].startswith("-m transformer average --last 5 --dir r")
    assert calls[3].startswith("-m transformer evaluate --checkpoint r/checkpoint_avg5.pt")


@pytest.mark.parametrize(
    "env, args, message",
    [
        ({"NGPUS": "0"}, [], "NGPUS=0 must be a whole number of at least 1"),
        ({"NGPUS": "abc"}, [], "NGPUS=abc must be a whole number"),
        ({"NGPUS": "1"}, ["train.keep_last=x"], "train.keep_last=x must be a whole number"),
    ],
)
def test_bad_counts_are_refused_before_any_work(tmp_path, env, args, message):
    log = tmp_path / "calls.log"
    stub = tmp_path / "python"
    stub.write_text(STUB_PYTHON)
    stub.chmod(0o755)
    environment = {**os.environ, "PYTHON": str(stub), "STUB_LOG": str(log), **env}
    result = subprocess.run(
        ["bash", str(REPO / "scripts/reproduce_wmt14.sh"), "base", *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and message in result.stderr
    assert not log.exists()  # nothing ran


def test_the_run_directory_and_checkpoint_count_follow_the_overrides(tmp_path):
    stub, log = tmp_path / "python", tmp_path / "calls.log"
    stub.write_text(STUB_PYTHON)
    stub.chmod(0o755)
    env = {**os.environ, "PYTHON": str(stub), "STUB_LOG": str(log), "NGPUS": "2"}
    overrides = ["train.output_dir=/scratch/run", "train.keep_last=3"]
    result = subprocess.run(
        ["bash", str(REPO / "scripts/reproduce_wmt14.sh"), "base", *overrides],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    assert calls[2].startswith("-m transformer average --last 3 --dir /scratch/run")
    assert "--checkpoint /scratch/run/checkpoint_avg3.pt" in calls[3]
