"""Tests for transformer/cpu/processes.py: one process per core, each keeping 1024 tokens."""

from __future__ import annotations

import pytest

from transformer.cpu.processes import cpu_processes


@pytest.mark.parametrize(
    "cores, tokens_per_update, expected",
    [(2, 4096, 2), (1, 4096, 1), (16, 4096, 4), (16, 25000, 16), (2, None, 1), (8, 1000, 1)],
)
def test_one_process_per_core_while_each_keeps_1024_tokens(cores, tokens_per_update, expected):
    assert cpu_processes(cores, tokens_per_update) == expected


def test_brute_force_every_small_case_keeps_the_promise():
    """The count is the largest n <= cores with tokens / n >= 1024, and never below 1."""
    for cores in range(1, 9):
        for tokens in range(256, 9000, 256):
            allowed = [n for n in range(1, cores + 1) if tokens / n >= 1024]
            assert cpu_processes(cores, tokens) == max(allowed, default=1)
