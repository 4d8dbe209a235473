"""Every update's batch fetch timed, for `scripts/gpu_check_worker.py train`.

The trainer's own records (metrics.jsonl) give tokens/s over a logging interval; the GPU check
also wants, update by update, how long the device waited for its batch, so it wraps the
trainer's batch stream in `TimedBatches`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path


class TimedBatches:
    """Wraps the trainer's batch stream (`Prefetcher`): times each update's fetch, counts it.

    The loop takes an update's micro-batches after the previous update's one host sync, so
    the time spent in that `next` (waiting for the read-ahead thread on a GPU, collating on
    the CPU) is time the device waits for data. One JSON line per update goes to `path`,
    flushed so that a killed run keeps them: `t` (start of the fetch, seconds), `wait` (its
    duration), real tokens `n_src`, `n_tgt` (target + eos) and the model FLOPs of the update
    (`transformer.train.flops.batch_flops`, the convention of the trainer's own MFU).
    With a `profiler` (gpu_check_probe.py), its window opens and closes at update fetches.
    `close` closes the file and the stream; the rest (`state_dict`, ...) goes to the stream.
    """

    def __init__(self, batches, path: Path, model_config, profiler=None) -> None:
        from transformer.train.flops import batch_flops

        self.batches, self.model_config, self.flops = batches, model_config, batch_flops
        self.profiler, self.updates = profiler, 0  # gpu_check_probe.UpdateProfiler or None
        self.file = open(path, "w", encoding="utf-8")  # noqa: SIM115 (closed by close())
        self.origin, self.stream = time.perf_counter(), None

    def __getattr__(self, name: str):
        return getattr(self.batches, name)

    def __iter__(self):
        return self

    def __enter__(self):  # the trainer reads its stream in a `with` (closed on errors)
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __next__(self):
        if self.stream is None:
            self.stream = iter(self.batches)
        if self.profiler is not None:
            self.profiler.at_update(self.updates)
        self.updates += 1
        start = time.perf_counter()
        micro_batches = next(self.stream)
        wait = time.perf_counter() - start
        line = {
            "t": start - self.origin,
            "wait": wait,
            "n_src": sum(batch.n_src_tokens for batch in micro_batches),
            "n_tgt": sum(batch.n_tgt_tokens for batch in micro_batches),
            "flops": self.flops(self.model_config, micro_batches),  # host tensors: no sync
        }
        self.file.write(json.dumps(line) + "\n")
        self.file.flush()
        return micro_batches

    def close(self) -> None:
        if self.profiler is not None:
            self.profiler.close()
        self.file.close()
        self.batches.close()
