"""Tests for transformer/train/distributed.py under torchrun on a GPU machine, without GPUs:
`torch.cuda` and `init_process_group` are faked, so the choice of each process's own GPU (and
the refusal of one GPU index for every process) is checked before any NCCL call."""

from __future__ import annotations

import pytest
import torch

from transformer.train.distributed import DistributedContext, init_distributed


def _torchrun_environment(monkeypatch, rank: int, gpus: int) -> list:
    """Rank `rank` of 2 under torchrun on a machine with `gpus` faked GPUs; returns the list
    that records `torch.cuda.set_device` and `init_process_group` calls (faked too)."""
    from transformer.train import distributed

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("LOCAL_RANK", str(rank))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    calls = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(("set", device)))
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(
        distributed.dist,
        "init_process_group",
        lambda backend, **kwargs: calls.append((backend, kwargs.get("device_id"))),
    )
    return calls


@pytest.mark.parametrize("setting", ["cuda:1", "cuda:0"])
def test_under_torchrun_a_gpu_index_is_refused_before_the_group_starts(monkeypatch, setting):
    calls = _torchrun_environment(monkeypatch, rank=1, gpus=2)
    with pytest.raises(ValueError) as error:
        init_distributed(setting)
    message = str(error.value)
    assert f"train.device '{setting}'" in message and "all 2 processes" in message
    assert "train.device=cuda" in message and "\n" not in message
    assert calls == []  # every rank on one GPU would stop NCCL: "Duplicate GPU detected"


@pytest.mark.parametrize("setting", ["cuda", "auto"])
def test_under_torchrun_cuda_is_each_processs_own_gpu(monkeypatch, setting):
    calls = _torchrun_environment(monkeypatch, rank=1, gpus=2)
    context = init_distributed(setting)
    gpu = torch.device("cuda", 1)
    assert context == DistributedContext(1, 2, 1, gpu, launched=True)
    assert calls == [("set", gpu), ("nccl", gpu)]
