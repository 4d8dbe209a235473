"""Tests for transformer/train/distributed.py: the torchrun context and its collectives.

References: closed forms of what two processes hold (the sum of their tensors, rank 0's object,
the list of every rank's object), computed by real gloo processes; and a one-process run with
`train.update_freq=2` for a two-process training job.
"""

from __future__ import annotations

import socket

import pytest
import torch
import torch.multiprocessing as mp

from transformer.checkpoint import read_checkpoint
from transformer.train.distributed import (
    DistributedContext,
    all_gather_object,
    all_reduce_sum,
    barrier,
    broadcast_object,
    init_distributed,
    shutdown,
)

TORCHRUN_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def test_without_torchrun_there_is_one_process_and_every_helper_is_a_no_op(monkeypatch):
    for name in TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    context = init_distributed("cpu")
    assert context == DistributedContext(0, 1, 0, torch.device("cpu"))
    assert context.is_main and not context.enabled
    assert not torch.distributed.is_initialized()
    tensor = torch.tensor([1.0, 2.0])
    assert all_reduce_sum(tensor, context) is tensor and tensor.tolist() == [1.0, 2.0]
    value = {"step": 3}
    assert broadcast_object(value, context) is value
    assert all_gather_object(value, context) == [value]
    barrier(context)
    shutdown(context)


def test_the_context_names_rank_0_the_main_process():
    assert not DistributedContext(rank=1, world_size=2).is_main
    assert DistributedContext(rank=0, world_size=2).enabled


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _collectives(rank: int, world: int, port: int, results) -> None:
    """One process of a gloo job: run every collective, report what this rank holds."""
    import os

    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        WORLD_SIZE=str(world),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
    )
    torch.set_num_threads(1)
    context = init_distributed("cpu")
    tensor = torch.tensor([float(rank + 1), 10.0 * rank], dtype=torch.float64)
    all_reduce_sum(tensor, context)
    broadcast = broadcast_object({"from": rank}, context)
    gathered = all_gather_object(f"rank {rank}", context)
    barrier(context)
    results.put(
        (
            rank,
            context.rank,
            context.world_size,
            context.is_main,
            tensor.tolist(),
            broadcast,
            gathered,
        )
    )
    shutdown(context)


def test_two_gloo_processes_sum_broadcast_and_gather():
    world, port = 2, _free_port()
    queue = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(_collectives, args=(world, port, queue), nprocs=world, start_method="spawn")
    results = sorted(queue.get() for _ in range(world))
    for rank, (reported, context_rank, size, is_main, tensor, broadcast, gathered) in enumerate(
        results
    ):
        assert (reported, context_rank, size, is_main) == (rank, rank, world, rank == 0)
        assert tensor == [1.0 + 2.0, 0.0 + 10.0]  # the sum over ranks, on every rank
        assert broadcast == {"from": 0}
        assert gathered == ["rank 0", "rank 1"]


def test_two_gloo_processes_match_one_process_with_update_freq_2(tmp_path, tiny_run):
    common = ["--config", str(tiny_run.config_path), *tiny_run.fast]
    common += ["train.max_steps=3", "model.dropout=0.0"]
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    tiny_run.python(
        ["-m", "transformer.train", *common, "train.update_freq=2", f"train.output_dir={single}"]
    )
    tiny_run.python(
        ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
        + ["-m", "transformer.train", *common, f"train.output_dir={ddp}"]
    )
    a = read_checkpoint(single / "checkpoint_last.pt")
    b = read_checkpoint(ddp / "checkpoint_last.pt")
    assert b["world_size"] == 2 and len(b["rng"]) == 2
    for key, value in a["model"].items():
        assert torch.allclose(value, b["model"][key], atol=1e-5, rtol=0), key
    for x, y in zip(tiny_run.records(single), tiny_run.records(ddp), strict=True):
        assert x["loss"] == pytest.approx(y["loss"], rel=1e-6)
        assert x["target_tokens"] == y["target_tokens"]
