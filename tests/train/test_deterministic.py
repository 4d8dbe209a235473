"""Tests for transformer/train/deterministic.py: the process-wide switches `train.deterministic`
makes, checked against torch's own getters (the bit-identical resume it serves is tested in
test_checkpoints.py, with and without it)."""

from __future__ import annotations

import os

import pytest
import torch

from transformer.train.deterministic import CUBLAS_WORKSPACE, use_deterministic_kernels


@pytest.fixture
def restored(monkeypatch):
    """Put back every global the switch changes."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    cuda = torch.backends.cuda
    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
        cuda.flash_sdp_enabled(),
        cuda.mem_efficient_sdp_enabled(),
        cuda.cudnn_sdp_enabled(),
    )
    yield
    torch.use_deterministic_algorithms(saved[0])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved[1:3]
    cuda.enable_flash_sdp(saved[3])
    cuda.enable_mem_efficient_sdp(saved[4])
    cuda.enable_cudnn_sdp(saved[5])


def test_on_cuda_every_nondeterministic_kernel_is_switched_off(restored):
    use_deterministic_kernels(torch.device("cuda", 0))  # only flags: no GPU needed
    assert torch.are_deterministic_algorithms_enabled()
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == CUBLAS_WORKSPACE
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    cuda = torch.backends.cuda
    assert not cuda.flash_sdp_enabled() and not cuda.mem_efficient_sdp_enabled()
    assert not cuda.cudnn_sdp_enabled() and cuda.math_sdp_enabled()  # equation 1 as written


def test_on_cpu_only_torchs_switch_is_set(restored):
    use_deterministic_kernels(torch.device("cpu"))
    assert torch.are_deterministic_algorithms_enabled()
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    assert torch.backends.cuda.flash_sdp_enabled()  # the GPU settings are left alone


def test_a_users_own_cublas_setting_is_kept(restored, monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")  # the other documented value
    use_deterministic_kernels(torch.device("cuda", 0))
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
