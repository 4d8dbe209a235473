"""Which fused attention kernels torch may choose on CUDA: not cuDNN's, for batches of new shapes.

`torch.nn.functional.scaled_dot_product_attention` picks a kernel per call among the backends
that are switched on. With the padding masks this project passes, on a Hopper GPU with torch
2.11, it picks cuDNN's fused attention, which builds an execution plan the first time it meets
a shape and reuses it only for that exact shape. A training run meets a new batch shape (batch
size, source and target length) at almost every batch of its first epoch and keeps meeting
new ones on a large corpus, and a beam search meets a new key length at every step: the plans
cost far more than the attention they serve. The memory-efficient kernel needs no plan and
runs about as fast per call (both measured by `scripts/gpu_check.sh`, step (g);
BENCHMARKS.md, "GPU"), so jobs switch cuDNN's off and leave the choice among the rest to torch.

Process-wide, like the other `torch.backends` switches. Source: the PyTorch documentation of
`torch.backends.cuda.enable_cudnn_sdp` and `torch.nn.attention.SDPBackend`.
"""

from __future__ import annotations

import torch


def avoid_cudnn_attention(device: torch.device) -> None:
    """Switch off cuDNN's fused attention for this process when `device` is a GPU (module doc);
    a no-op on other devices. `train.deterministic` later switches off every fused kernel.

    Args:
        device: The job's device.
    """
    if device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)
