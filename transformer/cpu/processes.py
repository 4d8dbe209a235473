"""How many training processes a CPU job runs: one per core, one thread each.

A process with one thread trains a Multi30k-sized model faster than one process with two
threads does: PyTorch's per-operator overheads do not shrink with threads, while two processes
(torch.distributed with gloo, Li et al., 2020, "PyTorch Distributed") each pay their own in
parallel (BENCHMARKS.md, "CPU training: processes"). The update keeps its size whatever the
count through `train.tokens_per_update`, which splits it between the processes.
"""

from __future__ import annotations

# Each process's share of the update stays at least this large (a chosen floor, not measured:
# BENCHMARKS.md measured two processes of 2048 tokens; smaller shares are untried).
MIN_TOKENS_PER_PROCESS = 1024


def cpu_processes(cores: int, tokens_per_update: int | None) -> int:
    """Training processes for a CPU job: one per core, each keeping 1024 tokens or more.

    Without `train.tokens_per_update` each process would add its own `max_tokens` to the
    update, so the job stays in one process.

    Args:
        cores: CPU cores the job may use.
        tokens_per_update: The config's `train.tokens_per_update`, or None.

    Returns:
        The process count, at least 1.
    """
    if tokens_per_update is None:
        return 1
    return max(1, min(cores, tokens_per_update // MIN_TOKENS_PER_PROCESS))
