"""Tests for transformer/train/distributed.py: the torchrun context and its collectives.

References: closed forms of what two processes hold (the sum of their tensors, rank 0's object,
the list of every rank's object), computed by real gloo processes; and a one-process run with
`train.update_freq=2` for a two-process training job.
"""

from __future__ import annotations

import queue as queue_module
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


def test_a_tensor_off_the_training_device_is_refused_before_any_collective():
    context = DistributedContext(rank=0, world_size=2, device=torch.device("cpu"))
    with pytest.raises(ValueError, match=r"tensor on meta.*training device cpu"):
        all_reduce_sum(torch.zeros(2, device="meta"), context)  # no process group needed


class _FailsOnRank1:
    """A stand-in for `Trainer`: rank 1 raises before its first update, while rank 0 waits in
    the update's first collective (the all-reduce of the token count) for rank 1."""

    def __init__(self, config, context, resume, prepared=None) -> None:
        self.context = context

    def train(self) -> None:
        if self.context.rank == 1:
            raise RuntimeError("injected failure on rank 1")
        all_reduce_sum(torch.ones(1), self.context)


def _train_command(rank: int, world: int, port: int, config: str, output_dir: str, results):
    """One process of a gloo job running `transformer-train` with `_FailsOnRank1` (its data
    prepared in `output_dir`, not in the config's folder under the repository); reports its
    exit status, or the name of the exception that escaped `main`."""
    import os

    from transformer.cli import train

    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        WORLD_SIZE=str(world),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
    )
    torch.set_num_threads(1)
    train.Trainer = _FailsOnRank1
    try:
        status = train.main(
            ["--config", config, "train.device=cpu", f"train.output_dir={output_dir}"]
        )
    except BaseException as error:  # noqa: B036 - what the process would exit with
        status = type(error).__name__
    results.put((rank, status))


def test_an_error_on_one_process_ends_every_process_of_the_job_at_once(tmp_path, tiny_run):
    """Before the fix, rank 1 waited in the closing barrier of `shutdown` for rank 0, itself
    waiting in an all-reduce for rank 1: the job hung until gloo's 30-minute timeout. Now
    rank 1 leaves without a barrier, and rank 0's all-reduce fails on the closed connection."""
    world, port = 2, _free_port()
    spawn = mp.get_context("spawn")
    results = spawn.Queue()
    args = (world, port, str(tiny_run.config_path), str(tmp_path / "run"), results)
    job = mp.start_processes(
        _train_command, args=args, nprocs=world, join=False, start_method="spawn"
    )
    try:
        reported = dict(results.get(timeout=30) for _ in range(world))
    except queue_module.Empty:
        pytest.fail("the job hung after rank 1 failed (no exit within 30 s)")
    finally:
        for process in job.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
    assert reported[1] == "RuntimeError"  # the injected error, not a hang in a barrier
    assert reported[0] != 0  # rank 0's collective failed: the job did not finish


def test_torchrun_with_one_process_trains_through_the_process_group(tmp_path, tiny_run):
    """One GPU must run the same collective code as eight: under torchrun a single process
    joins a process group too (gloo here, NCCL on a GPU), trains through DDP, and matches a
    run without torchrun exactly (DDP over one process averages over one)."""
    common = ["--config", str(tiny_run.config_path), *tiny_run.fast, "train.max_steps=3"]
    plain, launched = tmp_path / "plain", tmp_path / "torchrun"
    tiny_run.python(["-m", "transformer.train", *common, f"train.output_dir={plain}"])
    result = tiny_run.python(
        ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1"]
        + ["-m", "transformer.train", *common, f"train.output_dir={launched}"]
    )
    assert "x 1 process(es) (process group: gloo)" in result.stdout + result.stderr
    a = read_checkpoint(plain / "checkpoint_last.pt")
    b = read_checkpoint(launched / "checkpoint_last.pt")
    assert b["world_size"] == 1
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key


def _slow_preparation_job(
    rank: int, world: int, port: int, config: str, output_dir: str, results
) -> None:
    """One process of a gloo job whose collectives time out after 3 s, while rank 0 spends
    8 s preparing the data; reports `transformer-train`'s exit status."""
    import datetime
    import os
    import time

    import torch.distributed as dist

    from transformer.cli import train
    from transformer.train import run_data

    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        WORLD_SIZE=str(world),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
    )
    torch.set_num_threads(1)
    init = dist.init_process_group

    def short_timeout(*args, **kwargs):
        return init(*args, **{**kwargs, "timeout": datetime.timedelta(seconds=2)})

    dist.init_process_group = short_timeout
    prepare = run_data.prepare_data

    def slow_prepare(*args, **kwargs):
        if rank == 0:
            time.sleep(5)  # longer than the timeout, with room for a slow start
        return prepare(*args, **kwargs)

    run_data.prepare_data = slow_prepare
    argv = ["--config", config, "train.device=cpu", "data.valid=null", "train.max_steps=2"]
    try:
        status = train.main([*argv, f"train.output_dir={output_dir}"])
    except BaseException as error:  # noqa: B036 - what the process would exit with
        status = type(error).__name__
    results.put((rank, status))


def test_a_preparation_longer_than_the_collective_timeout_does_not_stop_the_job(tmp_path, tiny_run):
    """Before the fix rank 1 waited for rank 0's preparation in a barrier, which failed after
    the group's timeout (2 s here, 10 minutes for NCCL); now it waits for rank 0's files, and
    the group starts once both have the data."""
    world, port = 2, _free_port()
    spawn = mp.get_context("spawn")
    results = spawn.Queue()
    args = (world, port, str(tiny_run.config_path), str(tmp_path / "run"), results)
    job = mp.start_processes(
        _slow_preparation_job, args=args, nprocs=world, join=False, start_method="spawn"
    )
    try:
        reported = dict(results.get(timeout=120) for _ in range(world))
    finally:
        for process in job.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    assert reported == {0: 0, 1: 0}
    assert (tmp_path / "run" / "checkpoint_last.pt").is_file()
