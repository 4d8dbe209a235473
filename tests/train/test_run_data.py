"""Tests for transformer/train/run_data.py: rank 0 prepares, the other ranks wait for its files
(no collective) and then hold the same arrays (the reference: rank 0's own result)."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from transformer.data.prepare import DataNotPrepared, prepare_data
from transformer.train.distributed import DistributedContext
from transformer.train.run_data import prepare_run_data

ARRAYS = ("src_tokens", "src_offsets", "tgt_tokens", "tgt_offsets")


@pytest.mark.parametrize("bpe_dropout", [0.0, 0.1])
def test_another_rank_waits_for_rank_0_and_loads_the_same_data(tmp_path, tiny_run, bpe_dropout):
    """With BPE-dropout, rank 1 also waits for rank 0's samples (an entry inside the training
    corpus's entry) and draws the same epochs from them."""
    config = tiny_run.load(
        [f"train.output_dir={tmp_path / 'run'}", f"data.bpe_dropout={bpe_dropout}"]
    )
    rank1 = DistributedContext(rank=1, world_size=2)
    got = {}
    waiter = threading.Thread(
        target=lambda: got.update(data=prepare_run_data(config, rank1, poll_seconds=0.05))
    )
    waiter.start()
    time.sleep(0.5)
    assert waiter.is_alive()  # nothing prepared yet: rank 1 waits, it does not prepare
    assert not (tmp_path / "run" / "spm.model").exists()
    main = prepare_run_data(config, DistributedContext(rank=0, world_size=2), log=None)
    waiter.join(timeout=60)
    assert not waiter.is_alive()
    for name in ARRAYS:
        assert np.array_equal(getattr(got["data"].train, name), getattr(main.train, name))
        first, other = main.train.for_epoch(2, 1), got["data"].train.for_epoch(2, 1)
        assert np.array_equal(getattr(first, name), getattr(other, name))
    assert got["data"].tokenizer.src_vocab_size == main.tokenizer.src_vocab_size


def test_without_build_nothing_is_made(tmp_path, tiny_run):
    config = tiny_run.load([])
    with pytest.raises(DataNotPrepared, match="no SentencePiece model"):
        prepare_data(config.data, tmp_path, build=False)
    assert not any(tmp_path.glob("spm*"))
    prepare_data(config.data, tmp_path, log=None)
    (cache,) = [p for p in (tmp_path / "cache").iterdir() if p.name.startswith("train")]
    shutil.rmtree(cache)  # the model is there, the train split's token ids are not
    with pytest.raises(DataNotPrepared, match="train data not prepared yet"):
        prepare_data(config.data, tmp_path, build=False)


@pytest.mark.parametrize("corpus", ["missing", "empty"])
def test_a_failed_preparation_leaves_no_empty_run_directory(tmp_path, tiny_run, corpus):
    """A missing or empty corpus once left `checkpoints/nodata/` (or its empty `cache/`) behind;
    a directory that held files before is kept as it was."""
    for lang in ("en", "de"):
        (tmp_path / f"empty.{lang}").write_text("", encoding="utf-8")
    run_dir = tmp_path / "new" / "run"
    overrides = [f"train.output_dir={run_dir}", f"data.train={tmp_path / corpus}"]
    config = tiny_run.load(overrides)
    rank0 = DistributedContext(rank=0, world_size=1)
    with pytest.raises((FileNotFoundError, ValueError)):
        prepare_run_data(config, rank0, log=None)
    assert not run_dir.exists()
    run_dir.mkdir(parents=True)
    (run_dir / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises((FileNotFoundError, ValueError)):
        prepare_run_data(config, rank0, log=None)
    assert (run_dir / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_rank_0_removes_what_a_killed_save_left_and_says_so(tmp_path, tiny_run):
    """A save killed by SIGKILL leaves `.checkpoint_<step>.pt.<pid>.<hex>.tmp` (92 MB for the
    Multi30k model): the next run removes it. The pid is one no process has: the kernel's
    pid_max is the bound (the writer's own death is tested in tests/test_atomic.py)."""
    run = tmp_path / "run"
    run.mkdir()
    limit = Path("/proc/sys/kernel/pid_max")
    pid_max = int(limit.read_text()) if limit.exists() else 2**22  # Linux's largest
    left = run / f".checkpoint_62.pt.{pid_max + 1}.0a1b2c3d.tmp"
    left.write_bytes(b"partial")
    config = tiny_run.load([f"train.output_dir={run}"])
    said = []
    prepare_run_data(config, DistributedContext(rank=0, world_size=1), log=said.append)
    assert not left.exists()
    assert f"removed {left.name}, left by an interrupted write" in said
