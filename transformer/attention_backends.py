"""Which fused attention kernels torch may choose on CUDA: not cuDNN's, for batches of new shapes.

`torch.nn.functional.scaled_dot_product_attention` picks a kernel per call among the backends
that are switched on. With the padding masks this project passes, on a Hopper GPU with torch
2.11, it picks cuDNN's fused attention, which builds an execution plan the first time it meets
a shape and reuses it only for that exact shape. A training run meets a new batch shape (batch
size, source and target length) at almost every batch of its first epoch and keeps meeting
new ones on a large corpus, and a beam search meets a new key length at every step: the plans
cost far more than the attention they serve. The memory-efficient kernel needs no plan and
runs about as fast per call (both measured by `scripts/gpu_check.sh`, step (g);
BENCHMARKS.md, "GPU check on one H200"), so cuDNN's is left out and torch chooses among the rest.

A training run is one job, and switches it off for its process (as it sets TF32); decoding
(`Translator`, which a user's program may share with other models) leaves it out only while it
searches. Source: the PyTorch documentation of `torch.backends.cuda.enable_cudnn_sdp` and
`torch.nn.attention.sdpa_kernel`.
"""

from __future__ import annotations

import contextlib

import torch


def avoid_cudnn_attention(device: torch.device) -> None:
    """Switch off cuDNN's fused attention for this process when `device` is a GPU (module doc);
    a no-op on other devices. `train.deterministic` later switches off every fused kernel.

    Args:
        device: The job's device.
    """
    if device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)


def without_cudnn_attention(device: torch.device) -> contextlib.AbstractContextManager:
    """A context in which attention on a GPU may use the SDPA backends that are switched on,
    except cuDNN's (module doc); on other devices, a context that changes nothing.

    Args:
        device: The device the attention runs on.

    Returns:
        `torch.nn.attention.sdpa_kernel` of the enabled backends but cuDNN (the math backend
        when no other is left), or `contextlib.nullcontext()`.
    """
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    cuda = torch.backends.cuda
    enabled = [
        backend
        for backend, on in (
            (SDPBackend.FLASH_ATTENTION, cuda.flash_sdp_enabled()),
            (SDPBackend.EFFICIENT_ATTENTION, cuda.mem_efficient_sdp_enabled()),
            (SDPBackend.MATH, cuda.math_sdp_enabled()),
        )
        if on
    ]
    return sdpa_kernel(enabled or [SDPBackend.MATH])
