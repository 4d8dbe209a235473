"""Tests for transformer/device.py: one rule for "auto", "cpu", "cuda", "cuda:N", "mps" and bad
names.

The machine's GPUs are faked with monkeypatch (`torch.cuda.is_available`, `device_count`,
`torch.backends.mps.is_available`), so every branch runs on a CPU-only machine; the reference is
`torch.device` itself.
"""

from __future__ import annotations

import pytest
import torch

from transformer.device import check_device_name, resolve_device


@pytest.fixture
def gpus(monkeypatch):
    """`gpus(n)`: pretend this machine has n CUDA devices (0: none, CUDA unavailable)."""

    def fake(count: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)

    return fake


@pytest.mark.parametrize("count, expected", [(0, "cpu"), (1, "cuda"), (4, "cuda")])
def test_auto_is_cuda_when_there_is_a_gpu_else_the_cpu(gpus, count, expected):
    gpus(count)
    assert resolve_device("auto") == torch.device(expected)
    assert resolve_device(" auto ") == torch.device(expected)


def test_auto_and_cuda_under_torchrun_mean_the_local_ranks_gpu(gpus):
    gpus(4)
    assert resolve_device("auto", local_rank=3) == torch.device("cuda", 3)
    assert resolve_device("cuda", local_rank=2) == torch.device("cuda", 2)
    assert resolve_device("cuda:1", local_rank=2) == torch.device("cuda", 1)  # named: kept
    gpus(0)
    assert resolve_device("auto", local_rank=3) == torch.device("cpu")


@pytest.fixture
def mps(monkeypatch):
    """`mps(available)`: pretend this machine has (or lacks) Apple's MPS backend."""

    def fake(available: bool) -> None:
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: available)

    return fake


@pytest.mark.parametrize("name", ["cpu", torch.device("cpu"), "cpu:0"])
def test_names_torch_knows_are_torchs_devices(gpus, name):
    gpus(0)
    assert resolve_device(name) == torch.device(name)


def test_mps_is_accepted_only_where_it_is_available(mps):
    mps(True)
    assert resolve_device("mps") == torch.device("mps")
    mps(False)
    with pytest.raises(ValueError) as error:
        resolve_device("mps", what="--device")
    assert str(error.value) == (
        "--device 'mps': MPS is not available on this machine; use cpu, cuda, cuda:N or auto"
    )


@pytest.mark.filterwarnings("ignore:'mkldnn' is no longer used as device type")
@pytest.mark.parametrize(
    "name", ["meta", "xpu", "lazy", "mkldnn", "xla", torch.device("meta"), "meta:0"]
)
def test_device_types_the_project_does_not_run_on_are_refused(gpus, mps, name):
    gpus(2)
    mps(True)  # even where every backend is available
    with pytest.raises(ValueError) as error:
        resolve_device(name, what="train.device")
    assert str(error.value) == (
        f"train.device {str(torch.device(name))!r} is not a device this project runs on; "
        "use cpu, cuda, cuda:N or auto"
    )


@pytest.mark.parametrize("name", ["gpu0", "foo", "cuda:x", ""])
def test_unknown_names_are_refused_naming_the_setting_and_the_choices(name):
    with pytest.raises(ValueError) as error:
        resolve_device(name, what="train.device")
    assert str(error.value) == (
        f"train.device {name!r} is not a device; use cpu, cuda, cuda:N or auto"
    )


@pytest.mark.parametrize("name", ["cuda", "cuda:0", torch.device("cuda", 1)])
def test_cuda_without_a_gpu_is_refused(gpus, name):
    gpus(0)
    with pytest.raises(ValueError, match=r"^--device 'cuda(:\d)?': CUDA is not available"):
        resolve_device(name, what="--device")


def test_a_gpu_index_beyond_the_machines_is_refused(gpus):
    gpus(2)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match=r"^device 'cuda:2': this machine has 2 CUDA device\(s\)"):
        resolve_device("cuda:2")


@pytest.mark.parametrize("name", ["auto", "cpu", "cuda", "cuda:3", "mps"])
def test_the_name_check_accepts_what_another_machine_may_have(gpus, mps, name):
    """A config naming a GPU loads on a CPU-only machine (--print-config shows it): only
    `resolve_device`, when the job starts, asks what this machine has."""
    gpus(0)
    mps(False)
    check_device_name(name, what="train.device")
    with pytest.raises(ValueError):
        resolve_device(name if name not in ("auto", "cpu") else "cuda")


@pytest.mark.parametrize("name", ["tpu", "meta", "cuda:x", ""])
def test_the_name_check_refuses_what_resolve_device_refuses_by_name(name):
    with pytest.raises(ValueError) as expected:
        resolve_device(name, what="train.device")
    with pytest.raises(ValueError) as error:
        check_device_name(name, what="train.device")
    assert str(error.value) == str(expected.value)
