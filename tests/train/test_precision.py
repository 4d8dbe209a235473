"""Tests for transformer/train/precision.py: which precision runs, its autocast and its scaler.

References: the dtypes torch's own autocast gives a matrix product, and `GradScaler`'s
documented behaviour (a disabled scaler passes losses and steps through unchanged).
"""

from __future__ import annotations

import pytest
import torch

from transformer.train.precision import allow_tf32, autocast, grad_scaler, resolve_precision

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


@pytest.mark.parametrize("setting", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("device", [CPU, CUDA], ids=["cpu", "cuda"])
def test_an_explicit_setting_is_kept(setting, device):
    assert resolve_precision(setting, device) == setting


@pytest.mark.parametrize("native", [True, False], ids=["ampere", "pre-ampere"])
def test_auto_is_bf16_on_a_gpu_with_bf16_units_and_fp16_on_older_gpus(monkeypatch, native):
    """Before compute capability 8.0 torch only emulates bf16 (`including_emulation=True`,
    its default, says yes there), slower than float32: fp16 with loss scaling runs instead."""

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return native or including_emulation

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    precision = resolve_precision("auto", CUDA)
    assert precision == ("bf16" if native else "fp16")
    assert grad_scaler(precision, CPU).is_enabled() == (not native)  # fp16 scales the loss
    assert resolve_precision("auto", CPU) == "fp32"  # bf16 on CPU only when asked for


@pytest.mark.parametrize("native", [True, False])
def test_auto_works_with_a_torch_whose_check_takes_no_argument(monkeypatch, native):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: native)
    assert resolve_precision("auto", CUDA) == ("bf16" if native else "fp16")


@pytest.mark.parametrize(
    "precision, dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)]
)
def test_autocast_runs_matrix_products_in_the_precisions_dtype(precision, dtype):
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    with autocast(precision, CPU):
        product = a @ b
        assert torch.is_autocast_enabled("cpu") == (precision != "fp32")
    assert product.dtype == dtype
    torch.testing.assert_close(product.float(), a @ b, atol=0.1, rtol=0.05)
    assert (a @ b).dtype == torch.float32  # nothing is left switched on


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_the_scaler_is_enabled_for_fp16_only(precision):
    scaler = grad_scaler(precision, CPU)
    assert scaler.is_enabled() == (precision == "fp16")
    loss = torch.tensor(2.0)
    if precision == "fp16":
        assert scaler.scale(loss).item() == 2.0 * scaler.get_scale()
    else:
        assert scaler.scale(loss) is loss  # passed through unchanged


@pytest.fixture
def tf32_switches():
    """The two `torch.backends` switches `allow_tf32` sets, restored after the test."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield lambda: (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def test_tf32_is_allowed_for_cuda_products_only(tf32_switches):
    a, b = torch.randn(64, 256), torch.randn(256, 64)
    float32_product = a @ b
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    allow_tf32(CPU)
    assert tf32_switches() == (False, False)
    allow_tf32(CUDA)  # the switches exist, and may be set, without a GPU
    assert tf32_switches() == (True, True)
    assert torch.equal(a @ b, float32_product)  # CPU products keep float32 precision
