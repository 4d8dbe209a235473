"""Freed heap memory goes back to the OS: measured with the kernel's own count of the
process's anonymous memory (/proc/self/smaps_rollup), the reference."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from transformer.data import heap
from transformer.data.heap import release_free_memory


def anonymous_mib() -> float:
    with open("/proc/self/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Anonymous:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no Anonymous line")


linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc and /proc: Linux only"
)


@linux_only
def test_freed_arrays_under_the_mmap_threshold_are_returned(monkeypatch):
    # Another test's Trainer may have kept this process's heap (cpu/malloc.py): not this case.
    monkeypatch.setattr(heap, "freed_memory_kept", lambda: False)
    release_free_memory()  # start from a trimmed heap: a kept one may hold GBs of free pages
    first = np.ones(200_000)
    del first  # freeing a 1.6 MB mapping raises malloc's mmap threshold above that size
    before = anonymous_mib()
    arrays = [np.ones(200_000) for _ in range(400)]  # 1.6 MB each, now from the heap: 640 MB
    keep = arrays[-1]  # the top of the heap stays in use, so only a trim can return the rest
    del arrays
    held = anonymous_mib()
    assert release_free_memory()
    after = anonymous_mib()
    assert held - before > 300  # what malloc kept after the arrays were freed
    assert after < before + 50  # given back
    assert keep.sum() == 200_000


@linux_only
def test_a_heap_kept_on_purpose_is_not_trimmed(monkeypatch):
    """CPU training keeps freed memory for the next update (`transformer.cpu.malloc`): a trim
    after each epoch plan would make that update fault every returned page in again."""
    monkeypatch.setattr(heap, "freed_memory_kept", lambda: False)
    release_free_memory()  # start from a trimmed heap, as above
    monkeypatch.setattr(heap, "freed_memory_kept", lambda: True)
    first = np.ones(200_000)
    del first
    arrays = [np.ones(200_000) for _ in range(400)]  # as above: 640 MB from the heap
    keep = arrays[-1]
    del arrays
    held = anonymous_mib()
    assert release_free_memory() is False
    assert anonymous_mib() > held - 50  # still in the process
    monkeypatch.setattr(heap, "freed_memory_kept", lambda: False)
    assert release_free_memory()  # the same heap, trimmed: the memory was there to give back
    assert anonymous_mib() < held - 300
    assert keep.sum() == 200_000
