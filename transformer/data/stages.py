"""Stages of the data preparation: a progress bar each, and the time and peak memory they took.

`transformer-prepare` reports, per stage (reading and counting words, training SentencePiece,
encoding, filtering), the seconds it ran and the largest resident memory of the process while
it ran. On Linux the peak is reset at the start of each stage (writing 5 to
/proc/self/clear_refs resets VmHWM, see proc(5)); elsewhere the figure is the peak of the
process so far. Bars are drawn (tqdm, on stderr) only on a terminal.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tqdm import tqdm


@dataclass(frozen=True)
class StageRecord:
    """One finished stage: its name, seconds and peak resident memory in MiB."""

    name: str
    seconds: float
    peak_mib: float

    def __str__(self) -> str:
        return f"{self.name}: {self.seconds:.1f} s, peak memory {self.peak_mib:,.0f} MiB"


def _reset_peak() -> bool:
    """Reset the process's peak resident memory (Linux); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
        return True
    except OSError:
        return False


def peak_mib() -> float:
    """Peak resident memory since the last reset (VmHWM), else since the process started."""
    try:
        with open("/proc/self/status") as file:
            for line in file:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / 2**20  # KiB on Linux, bytes on macOS


class Stages:
    """Times the stages of one preparation and keeps their records.

    Args:
        log: Receives one line per finished stage (None: silent).
    """

    def __init__(self, log: Callable[[str], None] | None) -> None:
        self.log = log or (lambda message: None)
        self.records: list[StageRecord] = []

    @contextmanager
    def stage(self, name: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
        """Run one stage; yields `advance(pairs)` for its progress bar (a no-op without one).

        Args:
            name: Shown on the bar and in the record, e.g. "train: encode".
            total: Pairs the stage will process (None: no bar).
        """
        _reset_peak()
        start = time.perf_counter()
        bar = tqdm(
            total=total, desc=name, unit=" pairs", file=sys.stderr, disable=None, leave=False
        )
        try:
            yield bar.update
        finally:
            bar.close()
        record = StageRecord(name, time.perf_counter() - start, peak_mib())
        self.records.append(record)
        self.log(str(record))
