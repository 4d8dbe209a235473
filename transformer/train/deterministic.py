"""`train.deterministic`: only deterministic kernels, so that a resumed CUDA run is bit-identical.

A resumed run restores every state that training depends on (weights, Adam's moments, the
schedule, the loss scale, the batch position and every RNG state: `train/checkpoints.py`). On
a CPU that makes it continue bit for bit. On a GPU some kernels sum in an order that changes
from call to call: the backward passes of the flash and memory-efficient attention kernels
(atomic additions), cuBLAS with more than one workspace stream, and some cuDNN algorithms.
Their results differ in the last bits, so a resumed run (like a rerun) drifts from an
uninterrupted one. This switch trades speed for exact repeatability:

- `torch.use_deterministic_algorithms(True)`: deterministic implementations where torch has
  them (scatter-add in the loss's backward pass, for one), an error where it has none;
- cuBLAS with a fixed workspace (`CUBLAS_WORKSPACE_CONFIG=:4096:8`, NVIDIA's documented
  setting; it must be set before the first matrix product of the process);
- attention by the math SDPA backend (equation 1 as written; more memory, slower than the
  fused kernels), cuDNN deterministic and without autotuning.

The settings are global to the process (torch keeps them per process, not per model).
Sources: PyTorch's "Reproducibility" notes; the cuBLAS documentation, "Results reproducibility".
"""

from __future__ import annotations

import os

import torch

CUBLAS_WORKSPACE = ":4096:8"


def use_deterministic_kernels(device: torch.device) -> None:
    """Switch this process to deterministic kernels (see the module doc).

    Args:
        device: The training device; the CUDA settings are made for a CUDA device only.
    """
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.enable_flash_sdp(False)
        torch.backends.cuda.enable_mem_efficient_sdp(False)
        torch.backends.cuda.enable_cudnn_sdp(False)
    torch.use_deterministic_algorithms(True)
