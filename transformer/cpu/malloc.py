"""glibc's malloc keeps the memory of freed tensors for the next step: a switch for CPU training.

PyTorch takes the memory of every CPU tensor from the C library's allocator (`posix_memalign`).
glibc's malloc (the GNU C library manual, "The GNU Allocator"; mallopt(3)) serves a request
larger than its mmap threshold with a mapping of its own, and unmaps it when the tensor is
freed; the threshold starts at 128 KiB and rises with the blocks freed, but never above 32 MiB
on 64-bit Linux. The kernel hands out a new mapping one zero-filled 4 KiB page at a time, each
on its first touch (a minor page fault). A training step allocates and frees many blocks above
that cap: the logits and their gradient hold tokens x vocabulary numbers (4096 x 8000 float32
numbers are 131 MB), the activations of every layer are saved for the backward pass. So every
step maps, faults in, zero-fills and unmaps the same few hundred megabytes again, and the
kernel's share of the CPU time is large (BENCHMARKS.md, "CPU training: kernel time").

`keep_freed_memory()` sets two of malloc's parameters for the whole process (mallopt(3)):

- `M_MMAP_MAX = 0`: no block gets a mapping of its own; large ones come from the heap too;
- `M_TRIM_THRESHOLD = SIZE_MAX` (`-1` as mallopt's int): free memory at the top of the heap is
  never given back to the kernel.

Freed blocks then stay in the process, and the next step reuses their pages without a fault.
The price: the process keeps the heap of its largest step (its resident memory does not shrink
between steps) and the heap can fragment (PyTorch's `posix_memalign` asks for a little more
than a freed block of the same size holds, so the heap grows for a few steps before it is
reused). An explicit `malloc_trim` would still give free pages back, and the next update would
fault them in again, page by page: `transformer.data.heap` asks `freed_memory_kept()` and
leaves a kept heap alone after planning an epoch. The same settings, for a whole process from its
start: `MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=18446744073709551615`. Other C libraries
(macOS, musl) are left alone. The trainer calls it for CPU training (`train.keep_freed_memory`).
"""

from __future__ import annotations

import ctypes
import functools

# mallopt(3)'s parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_MMAP_MAX = -4

# Whether `keep_freed_memory()` took effect in this process (it holds for the process's life).
_KEPT = {"freed_memory": False}


@functools.lru_cache(maxsize=1)
def _glibc() -> ctypes.CDLL | None:
    """The running process's C library if it is glibc (it has `gnu_get_libc_version`), else None."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (an AttributeError elsewhere)
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    except (AttributeError, OSError):
        return None
    return libc


def mallopt(param: int, value: int) -> bool:
    """glibc's `mallopt(param, value)` for this process; False if it failed or this is not glibc."""
    libc = _glibc()
    return libc is not None and libc.mallopt(param, value) == 1


def keep_freed_memory() -> bool:
    """Make glibc's malloc keep freed memory in the process (see the module docstring).

    Process-wide and for the rest of the process; calling it again changes nothing.

    Returns:
        True when both settings took effect; False with another C library.
    """
    never_mapped = mallopt(M_MMAP_MAX, 0)
    never_trimmed = mallopt(M_TRIM_THRESHOLD, -1)  # a size_t inside glibc: SIZE_MAX
    _KEPT["freed_memory"] = _KEPT["freed_memory"] or (never_mapped and never_trimmed)
    return never_mapped and never_trimmed


def freed_memory_kept() -> bool:
    """Whether `keep_freed_memory()` took effect in this process (then nothing trims its heap)."""
    return _KEPT["freed_memory"]
