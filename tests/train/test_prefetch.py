"""Tests for transformer/train/prefetch.py: reading the training batches ahead in a thread.

The reference is the plain `BatchIterator`: the prefetcher must hand out the same batches in the
same groups, in the loop or from its thread, and report the position of the groups handed
out, never that of its read-ahead. The thread runs on the CPU here (`background=True`).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

from transformer.data.batching import BatchIterator
from transformer.data.dataset import ParallelDataset
from transformer.train.prefetch import Prefetcher

CPU = torch.device("cpu")


def make_batches(n: int = 120, seed: int = 0) -> BatchIterator:
    """About 20 batches an epoch of random pairs of 1 to 20 tokens."""
    rng = np.random.default_rng(seed)

    def flat(lengths):
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return rng.integers(4, 100, int(offsets[-1])).astype(np.uint16), offsets

    src, tgt = flat(rng.integers(1, 20, n)), flat(rng.integers(1, 20, n))
    return BatchIterator(ParallelDataset(*src, *tgt, np.arange(n)), 120, seed=3)


def indices(micro_batches) -> list[list[int]]:
    return [batch.indices.tolist() for batch in micro_batches]


def reading_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "prefetch-batches"]


def wait_for(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.parametrize("background", [False, True], ids=["loop", "thread"])
def test_the_same_batches_in_groups_of_update_freq_across_epochs(background):
    reference = iter(make_batches())
    updates = len(make_batches()) // 3 + 2  # into the second epoch (16 batches each)
    expected = [indices([next(reference) for _ in range(3)]) for _ in range(updates)]
    with Prefetcher(make_batches(), 3, CPU, background=background) as prefetcher:
        got = [indices(next(prefetcher)) for _ in range(updates)]
        assert prefetcher.state_dict() == {"epoch": 2, "index": 3 * updates - 16}
    assert got == expected
    assert not reading_threads()


def test_the_position_is_that_of_the_updates_handed_out_not_of_the_read_ahead():
    batches = make_batches()
    with Prefetcher(batches, 2, CPU, background=True, depth=2) as prefetcher:
        first = next(prefetcher)
        # The thread reads 3 updates ahead (2 queued, 1 waiting): batches 2..7, while 0..1
        # were handed out.
        wait_for(lambda: batches.state_dict()["index"] == 8)
        time.sleep(0.3)
        assert batches.state_dict()["index"] == 8  # and no further
        assert prefetcher.state_dict() == {"epoch": 1, "index": 2}
        second = next(prefetcher)
        assert prefetcher.state_dict() == {"epoch": 1, "index": 4}
    resumed = make_batches()
    resumed.load_state_dict({"epoch": 1, "index": 2})
    stream = iter(resumed)
    assert indices([next(stream), next(stream)]) == indices(second)
    assert indices(first) != indices(second)


def test_close_drops_the_read_ahead_and_reading_resumes_after_the_last_update():
    expected = Prefetcher(make_batches(), 2, CPU)
    expected = [indices(next(expected)) for _ in range(4)]
    prefetcher = Prefetcher(make_batches(), 2, CPU, background=True)
    got = [indices(next(prefetcher))]
    wait_for(lambda: prefetcher.batches.state_dict()["index"] == 8)
    prefetcher.close()
    prefetcher.close()  # a second close is harmless
    assert not reading_threads()
    assert prefetcher.state_dict() == {"epoch": 1, "index": 2}
    got += [indices(next(prefetcher)) for _ in range(3)]  # a new thread, from batch 2
    prefetcher.close()
    assert got == expected and not reading_threads()


def test_load_state_dict_stops_the_thread_and_moves_the_position():
    reference = make_batches()
    reference.load_state_dict({"epoch": 2, "index": 5})
    expected = next(iter(reference)).indices.tolist()
    with Prefetcher(make_batches(), 1, CPU, background=True) as prefetcher:
        next(prefetcher)
        prefetcher.load_state_dict({"epoch": 2, "index": 5})
        assert not reading_threads()
        assert prefetcher.state_dict() == {"epoch": 2, "index": 5}
        assert indices(next(prefetcher)) == [expected]
        with pytest.raises(ValueError, match="outside epoch"):
            prefetcher.load_state_dict({"epoch": 1, "index": 10_000})


class Interrupted(BaseException):
    """Stands in for KeyboardInterrupt or SystemExit raised while reading."""


@pytest.mark.parametrize("error", [ValueError("bad pair 7"), Interrupted("stop")])
def test_an_error_of_the_thread_is_raised_in_the_loop_after_the_good_updates(error):
    batches = make_batches()
    collate, calls = batches.collate, []

    def failing_collate(batch_indices):
        calls.append(1)
        if len(calls) == 3:
            raise error
        return collate(batch_indices)

    batches.collate = failing_collate
    prefetcher = Prefetcher(batches, 1, CPU, background=True)
    next(prefetcher), next(prefetcher)
    with pytest.raises(type(error), match=str(error)):
        next(prefetcher)
    assert not reading_threads()
    assert prefetcher.state_dict() == {"epoch": 1, "index": 2}


def test_the_thread_runs_only_on_a_gpu_by_default_and_pins_there():
    assert not Prefetcher(make_batches(), 1, CPU).background
    on_gpu = Prefetcher(make_batches(), 1, torch.device("cuda"))  # no thread before `next`
    assert on_gpu.background and on_gpu.pin
    with pytest.raises(ValueError, match="update_freq"):
        Prefetcher(make_batches(), 0, CPU)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_gpu_the_batches_are_pinned_for_asynchronous_copies():
    with Prefetcher(make_batches(), 2, torch.device("cuda")) as prefetcher:
        for batch in next(prefetcher):
            assert batch.src.is_pinned() and batch.tgt_in.is_pinned()
            assert batch.tgt_out.is_pinned()
            on_device = batch.to("cuda", non_blocking=True)
            assert torch.equal(on_device.src.cpu(), batch.src)
