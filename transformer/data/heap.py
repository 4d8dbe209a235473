"""Giving freed heap memory back to the operating system after a large, short-lived task.

Planning an epoch of WMT14 (`BatchIterator`: a permutation, length keys and a sort of 4.5M
pairs) allocates a few hundred MB of temporary arrays. glibc's malloc keeps part of what is
freed in its heap (arrays under its mmap threshold, about 12 MiB per process measured at
4.5M pairs), so every rank of a job would keep that much of a plan it no longer uses.
`malloc_trim(0)` (glibc) returns those pages; elsewhere this is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util


def release_free_memory() -> bool:
    """Return free heap pages to the OS (glibc `malloc_trim`); False where not available."""
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
