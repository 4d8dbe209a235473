"""Data-parallel training across processes: setup from torchrun's environment and collectives.

`torchrun --nproc_per_node N -m transformer.train ...` starts N processes and sets RANK,
LOCAL_RANK and WORLD_SIZE (and the rendezvous variables for multi-node runs). Each process
trains a replica on its own shard of batches; DistributedDataParallel averages gradients.
NCCL is used on GPUs, gloo on CPU. Under torchrun the job always runs through the process
group, also with `--nproc_per_node 1`, so that one GPU runs the same NCCL code as eight.
Without torchrun (RANK or WORLD_SIZE unset) nothing is initialised and every helper here is a
no-op.

Two steps, so that no collective waits on data preparation: `torchrun_context` reads this
process's place from the environment without any communication, the data are prepared (rank 0)
or awaited on the shared filesystem (the others, `transformer.train.run_data`), and only then
`join_process_group` starts the group, whose collectives time out after 10 minutes (NCCL's
watchdog) while preparing WMT14 takes longer.

One rule for every collective: its tensors live on the training device (`context.device`).
A job has one process group with one backend, and NCCL reduces GPU tensors only (a CPU tensor
fails with "No backend type associated with device type cpu"); a second, gloo group for CPU
tensors would double the setup and the ways to hang for a few numbers per update.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from transformer.device import resolve_device


@dataclass(frozen=True)
class DistributedContext:
    """Where this process stands in the job.

    Attributes:
        rank: Global rank (0 writes files and logs).
        world_size: Number of processes.
        local_rank: Rank on this node (selects the GPU).
        device: The device this process trains on.
        launched: Started by torchrun: the job runs through a process group, even of one.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    launched: bool = False

    @property
    def is_main(self) -> bool:
        """True on the process that writes files and logs."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        """True when the job runs through a process group (torchrun, or several processes)."""
        return self.launched or self.world_size > 1


def launched_rank() -> int | None:
    """This process's rank in a torchrun job (its RANK and WORLD_SIZE variables), else None."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["RANK"])
    return None


def torchrun_context(device_setting: str) -> DistributedContext:
    """This process's place in a torchrun job, from the environment; no communication.

    Args:
        device_setting: The `train.device` value (see `resolve_device`); under torchrun "cuda"
            and "auto" mean this process's own GPU, `cuda:LOCAL_RANK`.

    Returns:
        The context; one process on the named device without torchrun.

    Raises:
        ValueError: for a device `resolve_device` refuses, or, with more than one process, a
            GPU index ("cuda:1"): every process would take that one GPU (NCCL then stops with
            "Duplicate GPU detected").
    """
    launched = launched_rank() is not None
    world_size = int(os.environ.get("WORLD_SIZE", "1")) if launched else 1
    rank = launched_rank() or 0
    local_rank = int(os.environ.get("LOCAL_RANK", "0")) if launched else 0
    named = resolve_device(device_setting, what="train.device")
    if world_size > 1 and named.type == "cuda" and named.index is not None:
        raise ValueError(
            f"train.device {str(named)!r} names one GPU for all {world_size} processes; under "
            "torchrun use train.device=cuda (or auto): each process takes cuda:LOCAL_RANK"
        )
    device = resolve_device(device_setting, local_rank, what="train.device")
    return DistributedContext(rank, world_size, local_rank, device, launched)


def join_process_group(context: DistributedContext) -> DistributedContext:
    """Start the job's process group (NCCL on GPUs, gloo on CPU); a no-op without torchrun.

    Args:
        context: From `torchrun_context`.

    Returns:
        `context`.
    """
    if context.enabled and not dist.is_initialized():
        if context.device.type == "cuda":
            torch.cuda.set_device(context.device)
            dist.init_process_group("nccl", device_id=context.device)
        else:
            dist.init_process_group("gloo")
    return context


def init_distributed(device_setting: str) -> DistributedContext:
    """`torchrun_context` then `join_process_group`: for jobs that prepare nothing first.

    Raises:
        ValueError: as `torchrun_context`.
    """
    return join_process_group(torchrun_context(device_setting))


def shutdown(context: DistributedContext, failed: bool = False) -> None:
    """Leave the process group (no-op for a single process).

    After a normal end all processes first meet at a barrier: a process that tears down its gloo
    connections while another is still finishing its last collective can abort the other one.
    After an error (`failed`) there is no barrier: the other processes may be waiting in a
    collective this one will never join, so a barrier would hang the job. The group is torn
    down at once; its closed connections make gloo peers fail their pending collective, and
    torchrun stops the remaining processes once this one has exited non-zero.

    Args:
        context: This process's place in the job.
        failed: An exception is propagating (this process will exit non-zero).
    """
    if context.enabled and dist.is_initialized():
        if not failed:
            dist.barrier()
        dist.destroy_process_group()


def all_reduce_sum(tensor: torch.Tensor, context: DistributedContext) -> torch.Tensor:
    """Sum `tensor` over all processes, in place; returns it.

    Args:
        tensor: A tensor on `context.device` (the module's rule: NCCL reduces GPU tensors only).
        context: This process's place in the job.

    Returns:
        `tensor`, now holding the sum.

    Raises:
        ValueError: in a job of several processes, for a tensor on another type of device than
            the training device, naming both (the check NCCL makes, also made with gloo).
    """
    if context.enabled:
        if tensor.device.type != context.device.type:
            raise ValueError(
                f"all_reduce_sum: tensor on {tensor.device}, but collectives of this job run "
                f"on the training device {context.device}"
            )
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def process_group_backend() -> str:
    """The backend of the job's process group ("nccl", "gloo"), or "none" without one."""
    return str(dist.get_backend()) if dist.is_initialized() else "none"


def barrier(context: DistributedContext) -> None:
    """Wait until every process gets here."""
    if context.enabled:
        dist.barrier()


def broadcast_object(value: object, context: DistributedContext) -> object:
    """Rank 0's `value` on every process (a picklable object)."""
    if not context.enabled:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0, device=_collective_device(context))
    return box[0]


def all_gather_object(value: object, context: DistributedContext) -> list:
    """Every process's `value`, as a list indexed by rank."""
    if not context.enabled:
        return [value]
    gathered = [None] * context.world_size
    dist.all_gather_object(gathered, value)
    return gathered


def _collective_device(context: DistributedContext) -> torch.device | None:
    """NCCL moves objects through the GPU; gloo through the CPU."""
    return context.device if context.device.type == "cuda" else None
