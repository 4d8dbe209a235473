"""Numeric precision of training: float32, bf16 autocast, or fp16 autocast with loss scaling.

bf16 has float32's exponent range, so it needs no loss scaling; fp16 does: its gradients are
multiplied by a dynamic scale (`torch.amp.GradScaler`) and updates whose gradients overflow
are skipped. The loss itself is always computed in float32 (see loss.py).

On a GPU, training also lets float32 matrix products and convolutions run on TF32 tensor cores
(`allow_tf32`, 10-bit mantissa products with float32 accumulation, as
`torch.set_float32_matmul_precision("high")`): under autocast these are the products autocast
leaves in float32, in an fp32 run all of them. TF32 is deterministic, so it stays on with
`train.deterministic`. CPU products are not affected.
"""

from __future__ import annotations

import contextlib

import torch


def resolve_precision(setting: str, device: torch.device) -> str:
    """Map `train.precision` to "fp32", "bf16" or "fp16".

    "auto" is bf16 autocast on a GPU with bf16 arithmetic units (compute capability 8.0,
    Ampere, and later; ROCm GPUs), fp16 autocast with loss scaling on older GPUs (there torch
    only emulates bf16, slower than float32), and fp32 on other devices. On CPU, bf16 autocast
    is used only when asked for explicitly (it pays off on CPUs with native bf16 units).

    Args:
        setting: "auto", "fp32", "bf16" or "fp16" (checked by `TrainConfig`).
        device: Where training runs (the current CUDA device, for a GPU).

    Returns:
        The precision.
    """
    if setting == "auto":
        if device.type != "cuda":
            return "fp32"
        return "bf16" if _native_bf16() else "fp16"
    return setting


def _native_bf16() -> bool:
    """The current CUDA device computes in bf16 natively (not by emulation)."""
    try:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # older torch: no `including_emulation`, and no emulation either
        return torch.cuda.is_bf16_supported()


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The autocast context of a resolved precision (a no-op context for fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device.type, dtype=dtype)


def grad_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """A gradient scaler, enabled for fp16 only (a disabled scaler passes everything through)."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")


def allow_tf32(device: torch.device) -> None:
    """Let float32 matrix products and convolutions on CUDA use TF32 tensor cores (module doc);
    a no-op on other devices. Process-wide, like the other `torch.backends` switches."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
