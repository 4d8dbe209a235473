"""Worker processes and process-wide settings for `benchmarks/benchmark.py`.

Each engine runs in its own spawned process with the same settings (threads, denormal
flushing, environment), keeps its model between calls, and runs only when the parent asks, so
engines alternate round by round without ever competing for the CPU. The facts about the
machine that a report records are in `benchmarks/machine.py`.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback
from dataclasses import dataclass

import torch

from benchmarks.engines import Dims, Engine
from benchmarks.machine import cpu_times, peak_memory_mib, reset_peak_memory


@dataclass(frozen=True)
class ProcessSettings:
    """Process-wide settings applied identically in every worker.

    Args:
        threads: Intra-op threads (torch.set_num_threads, OMP_NUM_THREADS, MKL_NUM_THREADS).
        flush_denormal: torch.set_flush_denormal (denormal floats treated as zero).
        device: "cpu" or "cuda".
    """

    threads: int
    flush_denormal: bool = True
    device: str = "cpu"

    def environment(self) -> dict[str, str]:
        """Environment variables every worker starts with."""
        n = str(self.threads)
        return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "TOKENIZERS_PARALLELISM": "false"}

    def apply(self) -> None:
        """Apply the settings to the current process (call first thing in a worker)."""
        torch.set_num_threads(self.threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # already set, or inter-op work started (only in the main process)
            pass
        torch.set_flush_denormal(self.flush_denormal)


class WorkerError(RuntimeError):
    """An exception raised inside a worker process (its traceback is the message)."""


def _worker_loop(connection, engine_name: str, dims: Dims, settings: ProcessSettings, seed: int):
    """Body of a worker process: build the engine, then serve (method, kwargs) calls."""
    settings.apply()
    if engine_name == "hf":
        import transformers

        transformers.logging.set_verbosity_error()  # generation-flag warnings, once per call
    try:
        engine = Engine(engine_name, dims, seed, settings.device)
        connection.send(("ok", engine.describe()))
    except Exception:  # noqa: BLE001 - reported to the parent, which raises it
        connection.send(("error", traceback.format_exc()))
        return
    while True:
        message = connection.recv()
        if message is None:
            return
        method, kwargs = message
        try:
            connection.send(("ok", _serve(engine, method, kwargs)))
        except Exception:  # noqa: BLE001
            connection.send(("error", traceback.format_exc()))


def _serve(engine: Engine, method: str, kwargs: dict):
    if method == "train":
        return engine.train(**kwargs)
    if method == "decode":
        return engine.decode(**kwargs)
    if method == "train_peak_memory":
        reset_peak_memory(engine.device.type)
        steps = engine.train(**kwargs)
        return {"steps": steps, "peak_mib": peak_memory_mib(engine.device.type)}
    raise ValueError(f"unknown worker method {method!r}")


class Worker:
    """A spawned process holding one engine.

    Args:
        engine_name: "ours", "torch_nn" or "hf".
        dims: Model sizes.
        settings: Process settings (identical for every worker of a run).
        seed: Seed of the random weights.

    Raises:
        WorkerError: (from `info` or `call`) when the engine cannot be built, e.g. without
            transformers.
    """

    def __init__(self, engine_name: str, dims: Dims, settings: ProcessSettings, seed: int = 0):
        context = multiprocessing.get_context("spawn")
        self.name = engine_name
        self._connection, child = context.Pipe()
        saved = dict(os.environ)
        os.environ.update(settings.environment())  # a spawned child copies the environment
        try:
            self._process = context.Process(
                target=_worker_loop, args=(child, engine_name, dims, settings, seed), daemon=True
            )
            self._process.start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        child.close()
        self.last_call: dict = {}
        self._info: dict | None = None

    @property
    def info(self) -> dict:
        """The engine's description; waits until the worker has built its engine, so that
        several workers started one after the other build their models in parallel."""
        if self._info is None:
            self._info = self._receive()
        return self._info

    def _receive(self):
        try:
            status, payload = self._connection.recv()
        except EOFError as error:
            raise WorkerError(
                f"worker {self.name!r} died (exit code {self._process.exitcode})"
            ) from error
        if status == "error":
            raise WorkerError(f"worker {self.name!r} failed:\n{payload}")
        return payload

    def call(self, method: str, **kwargs):
        """Run `engine.<method>(**kwargs)` in the worker and return its result.

        Also records, in `self.last_call`, the call's wall time and the CPU seconds the whole
        machine spent meanwhile (see `others_cpu_percent`).
        """
        self.info  # noqa: B018 - wait until the engine is built
        before, wall = cpu_times(), time.perf_counter()
        self._connection.send((method, kwargs))
        result = self._receive()
        after, wall = cpu_times(), time.perf_counter() - wall
        busy = None
        if before and after:
            ticks = (after[0] - after[1]) - (before[0] - before[1])
            busy = ticks / os.sysconf("SC_CLK_TCK")
        self.last_call = {"wall_seconds": wall, "machine_busy_seconds": busy}
        return result

    def others_cpu_percent(self, own_cpu_seconds: float) -> float | None:
        """Share of all CPUs used by other processes during the last call, in percent.

        Args:
            own_cpu_seconds: CPU seconds the worker itself spent in that call.
        """
        busy = self.last_call["machine_busy_seconds"]
        if busy is None:
            return None
        capacity = self.last_call["wall_seconds"] * (os.cpu_count() or 1)
        return max(0.0, 100.0 * (busy - own_cpu_seconds) / capacity)

    def close(self) -> None:
        """Stop the worker process (waits briefly, then terminates it)."""
        if self._process.is_alive():
            try:
                self._connection.send(None)
            except (BrokenPipeError, OSError):
                pass
            self._process.join(timeout=30)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()
        self._connection.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
