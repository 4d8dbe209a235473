"""Giving freed heap memory back to the operating system after a large, short-lived task.

Planning an epoch of WMT14 (`BatchIterator`: a permutation, length keys and a sort of 4.5M
pairs) allocates a few hundred MB of temporary arrays. glibc's malloc keeps part of what is
freed in its heap (arrays under its mmap threshold, about 12 MiB per process measured at
4.5M pairs), so every rank of a job would keep that much of a plan it no longer uses.
`malloc_trim(0)` (glibc) returns those pages; elsewhere this is a no-op. A process whose
heap keeps freed memory on purpose (`transformer.cpu.malloc`, CPU training) is left alone: its
next update would fault the returned pages in again, one by one (BENCHMARKS.md, "CPU training:
kernel time"), and the plan's few hundred MB are reused by the next update anyway.
"""

from __future__ import annotations

import ctypes
import ctypes.util

from transformer.cpu.malloc import freed_memory_kept


def release_free_memory() -> bool:
    """Return free heap pages to the OS (glibc `malloc_trim`).

    Returns:
        True when it trimmed; False where glibc's `malloc_trim` is not available or the heap
        keeps freed memory (`transformer.cpu.malloc.freed_memory_kept()`).
    """
    if freed_memory_kept():  # kept on purpose: trimming would cost page faults at every epoch
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        trim = getattr(libc, "malloc_trim", None)
    except OSError:
        return False
    if trim is None:
        return False
    trim(0)
    return True
