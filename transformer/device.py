"""Which torch device a job runs on: one rule for training, decoding and the command line.

"auto" means CUDA when this machine has a GPU, else the CPU; "cpu", "cuda", "cuda:N" and (on
Apple silicon) "mps" are checked against what the machine has, so a typo, a missing GPU or a
device type the project does not run on ("meta", "xpu", "lazy", ...) is a one-line error before
any work starts.
"""

from __future__ import annotations

import torch

CHOICES = "use cpu, cuda, cuda:N or auto"


def check_device_name(device: str | torch.device, what: str = "device") -> None:
    """Refuse a device name torch does not know, or a device type the project does not run on.

    The part of `resolve_device`'s check that holds on any machine: configs run it when they
    load, so `transformer-train --print-config` refuses what training would.

    Args:
        device: "auto", "cpu", "cuda", "cuda:N", "mps", or a `torch.device` of those.
        what: How the setting is called in messages ("train.device", "--device").

    Raises:
        ValueError: for a name torch does not know or another device type (meta, xpu, ...),
            naming `what` and the value.
    """
    if isinstance(device, str) and device.strip() == "auto":
        return
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"{what} {device!r} is not a device; {CHOICES}") from error
    if resolved.type not in ("cpu", "cuda", "mps"):
        raise ValueError(
            f"{what} {str(resolved)!r} is not a device this project runs on; {CHOICES}"
        )


def resolve_device(
    device: str | torch.device, local_rank: int | None = None, what: str = "device"
) -> torch.device:
    """The torch device that `device` names, checked against this machine.

    Args:
        device: "auto" (CUDA when present, else the CPU), "cpu", "cuda", "cuda:N", "mps" where
            `torch.backends.mps.is_available()`, or a `torch.device` of those.
        local_rank: Under torchrun, the GPU that "auto" and "cuda" mean (`cuda:local_rank`);
            None means the current GPU.
        what: How the setting is called in messages ("train.device", "--device").

    Returns:
        The device.

    Raises:
        ValueError: for a name torch does not know or another device type (meta, xpu, ...),
            CUDA or MPS on a machine without it, or a GPU index beyond the machine's, naming
            `what` and the value.
    """
    if isinstance(device, str) and device.strip() == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    check_device_name(device, what)
    resolved = torch.device(device)
    if resolved.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(
            f"{what} {str(resolved)!r}: MPS is not available on this machine; {CHOICES}"
        )
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{what} {str(resolved)!r}: CUDA is not available on this machine")
        count = torch.cuda.device_count()
        if resolved.index is not None and resolved.index >= count:
            raise ValueError(f"{what} {str(resolved)!r}: this machine has {count} CUDA device(s)")
        if resolved.index is None and local_rank is not None:
            resolved = torch.device("cuda", local_rank)
    return resolved
