"""Stage records: seconds against a clock, peak memory against an allocation of known size."""

from __future__ import annotations

import mmap
import sys
import time

import numpy as np
import pytest

from transformer.data.stages import Stages


def test_each_stage_records_its_time_and_its_own_peak():
    messages = []
    stages = Stages(messages.append)
    with stages.stage("big", total=3) as advance:
        # 400 MiB of fresh pages, touched (malloc could hand out memory already resident)
        block = mmap.mmap(-1, 400 * 2**20)
        np.frombuffer(block, dtype=np.uint8)[::4096] = 1
        advance(3)
        block.close()
    with stages.stage("small"):
        time.sleep(0.2)
    big, small = stages.records
    assert big.name == "big" and big.peak_mib > 400
    assert small.seconds >= 0.2
    if sys.platform.startswith("linux"):  # the peak is reset per stage there
        assert small.peak_mib < big.peak_mib - 300
    assert messages == [str(big), str(small)]
    assert str(small).startswith("small: 0.2 s, peak memory ")


def test_a_failing_stage_records_nothing_and_raises():
    stages = Stages(None)
    with pytest.raises(RuntimeError), stages.stage("broken"):
        raise RuntimeError("no")
    assert stages.records == []
