"""transformer/cpu/malloc.py: freed tensor memory stays in the process (glibc's malloc).

The reference is the same allocation pattern in a fresh process left as glibc starts it: there
every large tensor gets a mapping of its own, so each new one is faulted in page by page again.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from transformer.cpu import malloc

needs_glibc = pytest.mark.skipif(malloc._glibc() is None, reason="the C library is not glibc")

PAGE = 4096
MiB = 2**20

# A fresh process allocates, fills and frees a tensor `passes` times and reports the minor page
# faults of the loop (64 MiB: above glibc's 32 MiB mmap cap, so mapped anew each time by default).
PATTERN = """
import json, resource, sys
import torch
from transformer.cpu import malloc
keep, size, passes = sys.argv[1] == "keep", int(sys.argv[2]), int(sys.argv[3])
kept_before = malloc.freed_memory_kept()
applied = malloc.keep_freed_memory() if keep else None
torch.ones(1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(passes):
    tensor = torch.empty(size, dtype=torch.uint8)
    tensor.fill_(1)  # touch every page
    del tensor
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
kept = [kept_before, malloc.freed_memory_kept()]
print(json.dumps({"applied": applied, "faults": faults, "kept": kept}))
"""


def faults_of(setting: str, size: int = 64 * MiB, passes: int = 40) -> dict:
    """Run `PATTERN` in a fresh Python process, "keep" (`keep_freed_memory`) or "default"."""
    out = subprocess.run(
        [sys.executable, "-c", PATTERN, setting, str(size), str(passes)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


@needs_glibc
def test_freed_tensors_are_not_faulted_in_again():
    # The kept heap grows for a varying number of first passes (7-13 of 16,384-page faults
    # each seen), then stops; the default faults all pages on every pass: 100 passes keep the
    # two far apart.
    pages, passes = 64 * MiB // PAGE, 100
    reference = faults_of("default", passes=passes)
    kept = faults_of("keep", passes=passes)
    assert kept["applied"] is True and reference["applied"] is None
    assert kept["kept"] == [False, True] and reference["kept"] == [False, False]
    # As glibc starts: every pass maps the tensor anew and faults in all its pages.
    assert reference["faults"] >= 0.9 * passes * pages
    # Kept: the heap grows for the first passes (a freed block is one alignment pad too small
    # for the next posix_memalign until freed neighbours merge), then the passes reuse it.
    assert kept["faults"] < 0.3 * reference["faults"]


def test_another_c_library_is_left_alone(monkeypatch):
    monkeypatch.setattr(malloc, "_glibc", lambda: None)
    monkeypatch.setitem(malloc._KEPT, "freed_memory", False)
    assert malloc.keep_freed_memory() is False
    assert malloc.freed_memory_kept() is False  # nothing kept, so trimming stays allowed
    assert malloc.mallopt(malloc.M_MMAP_MAX, 0) is False
