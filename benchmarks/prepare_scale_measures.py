"""The measurements of `benchmarks/prepare_scale.py`, and the memory readings from /proc they use.

- `run_prepare`: transformer-prepare in a subprocess, its wall time and external peak;
- `collation`: one epoch's batches collated in a process pinned to one core (`collation_worker`);
- `shared_memory`: `ranks` processes sharing the prepared cache at once, then one alone
  (`rank_worker`), each one's data memory measured while every rank is still alive;
- `tree_rss_kib`: the resident memory of a process and all its descendants (the external
  peak of `transformer-prepare`, which resets its own VmHWM per stage);
- `anonymous_kib`, `mapped_kib`: a process's anonymous memory (smaps_rollup) and the Rss /
  Pss of its mappings of files under a directory (smaps): a page of a file that k processes
  map counts 1/k in each one's Pss, so the Pss of the ranks sum to the pages they share once.

The workers run in processes of the "spawn" context and put one dict on their queue: their
figures, or {"error": traceback}. A failed measurement raises `MeasureError`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue as queues
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

from transformer.config import load_config
from transformer.data.batching import BatchIterator
from transformer.data.prepare import prepare_data

REPO = Path(__file__).resolve().parents[1]


class MeasureError(RuntimeError):
    """transformer-prepare or a worker process failed (the message says which, and how)."""


def _status_kib(pid: int | str, key: str) -> int:
    """A `key:` field of /proc/PID/status in KiB (0 when it has none: a zombie)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_kib(pid: int | str = "self") -> int:
    """Resident memory of one process (VmRSS), KiB."""
    return _status_kib(pid, "VmRSS")


def tree_rss_kib(pid: int) -> int:
    """Resident memory of `pid` and of all its descendants, summed (KiB); processes that end
    while they are read count 0."""
    total, todo = 0, [pid]
    while todo:
        process = todo.pop()
        try:
            total += rss_kib(process)
            for task in os.listdir(f"/proc/{process}/task"):
                with open(f"/proc/{process}/task/{task}/children") as children:
                    todo += [int(child) for child in children.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def anonymous_kib(pid: int | str = "self") -> int:
    """Anonymous memory of a process (the `Anonymous:` line of /proc/PID/smaps_rollup), KiB."""
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Anonymous:"):
                return int(line.split()[1])
    raise ValueError(f"/proc/{pid}/smaps_rollup has no Anonymous line")


def mapped_kib(directory: str | Path, pid: int | str = "self") -> dict[str, int]:
    """Size, Rss and Pss (KiB) of a process's mappings of files under `directory`, summed.

    /proc/PID/smaps is a header line per mapping (`start-end perms offset dev inode path`)
    followed by `Field: N kB` lines; the path is the sixth field of the header.
    """
    prefix = os.path.realpath(directory) + os.sep
    totals = {"size": 0, "rss": 0, "pss": 0}
    inside = False
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            head, _, rest = line.partition(" ")
            if "-" in head and not head.endswith(":"):  # a mapping's header line
                fields = rest.split(None, 4)
                inside = len(fields) == 5 and fields[4].rstrip("\n").startswith(prefix)
            elif inside and head[:-1].lower() in totals and head.endswith(":"):
                totals[head[:-1].lower()] += int(rest.split()[0])
    return totals


def _prepared(config):
    """The `PreparedData` of the config's run directory, building nothing (as ranks > 0 do)."""
    return prepare_data(config.data, config.train.output_dir, log=None, build=False)


def _iterator(config, prepared, rank: int = 0, world_size: int = 1) -> BatchIterator:
    ids = dict(pad_id=prepared.tokenizer.pad_id, bos_id=prepared.tokenizer.bos_id)
    return BatchIterator(
        prepared.train,
        config.train.max_tokens,
        eos_id=prepared.tokenizer.eos_id,
        seed=config.train.seed,
        rank=rank,
        world_size=world_size,
        **ids,
    )


def _collate_epoch(batches: BatchIterator) -> tuple[int, int]:
    """(batches, target tokens) of epoch 1, every batch collated and dropped."""
    count = tgt = 0
    for batch in batches.epoch(1):
        count, tgt = count + 1, tgt + batch.n_tgt_tokens
    return count, tgt


def collation_worker(config_path, overrides, cpu: int, max_seconds: float | None, queue) -> None:
    """Collate epoch 1 on core `cpu` with one thread; stop early after `max_seconds`."""
    try:
        os.sched_setaffinity(0, {cpu})
        torch.set_num_threads(1)
        config = load_config(config_path, overrides)
        prepared = _prepared(config)
        start = time.perf_counter()
        batches = _iterator(config, prepared)  # plans epoch 1 (its order and batches)
        planning, epoch_batches = time.perf_counter() - start, len(batches)
        src = tgt = count = 0
        start, cpu_start = time.perf_counter(), time.process_time()
        for batch in batches.epoch(1):
            src, tgt, count = src + batch.n_src_tokens, tgt + batch.n_tgt_tokens, count + 1
            if max_seconds is not None and time.perf_counter() - start > max_seconds:
                break
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        queue.put(
            {
                "cpu": cpu,
                "max_tokens": config.train.max_tokens,
                "planning_seconds": planning,
                "batches": count,
                "epoch_batches": epoch_batches,
                "whole_epoch": count == epoch_batches,
                "src_tokens": src,
                "tgt_tokens": tgt,
                "seconds": seconds,
                "cpu_seconds": cpu_seconds,
                "tgt_tokens_per_second": tgt / seconds,
                "tgt_tokens_per_cpu_second": tgt / max(cpu_seconds, 1e-9),
            }
        )
    except BaseException:
        queue.put({"error": traceback.format_exc()})


def rank_worker(config_path, overrides, rank: int, world_size: int, barrier, queue) -> None:
    """Open the prepared data, collate this rank's whole epoch 1, and measure its data memory
    (module docstring) once every rank has collated; exit when every rank has measured."""
    try:
        torch.set_num_threads(1)
        config = load_config(config_path, overrides)
        cache = config.data.cache_dir or Path(config.train.output_dir) / "cache"
        anonymous_before = anonymous_kib()
        prepared = _prepared(config)
        count, tgt = _collate_epoch(_iterator(config, prepared, rank, world_size))
        barrier.wait(timeout=3600)  # every rank has touched what it needs
        mapped = mapped_kib(cache)
        anonymous = anonymous_kib() - anonymous_before
        queue.put(
            {
                "rank": rank,
                "batches": count,
                "tgt_tokens": tgt,
                "anonymous_kib": anonymous,
                "cache_pss_kib": mapped["pss"],
                "cache_rss_kib": mapped["rss"],
                "cache_mapped_kib": mapped["size"],
                "data_kib": anonymous + mapped["pss"],
                "rss_kib": rss_kib(),
            }
        )
        barrier.wait(timeout=3600)  # every rank has measured: now all may exit
    except BaseException:
        barrier.abort()
        queue.put({"rank": rank, "error": traceback.format_exc()})


def run_prepare(config: str, overrides: list[str], json_path: Path, log_path: Path) -> dict:
    """Run transformer-prepare; its wall time, external peak and summary (module doc, 1)."""
    command = [sys.executable, "-m", "transformer.cli.prepare", "--config", config]
    command += [*overrides, "--json", str(json_path)]
    paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    peak = 0
    with open(log_path, "wb") as log:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=log)
        while process.poll() is None:
            peak = max(peak, tree_rss_kib(process.pid))
            time.sleep(0.02)
        seconds = time.perf_counter() - start
    if process.returncode != 0:
        last = log_path.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        raise MeasureError(
            f"transformer-prepare failed (exit {process.returncode}): {last[0]} (log: {log_path})"
        )
    summary = json.loads(json_path.read_text())
    return {"seconds": seconds, "peak_mib": peak / 1024, "command": command, "summary": summary}


def _gather(processes: list, queue) -> list[dict]:
    """Start the worker processes, collect one dict from each, join them."""
    for process in processes:
        process.start()
    results = []
    while len(results) < len(processes):
        try:
            results.append(queue.get(timeout=1.0))
        except queues.Empty:  # a worker that died without a word would leave the others
            if any(process.exitcode not in (None, 0) for process in processes):  # waiting
                for process in processes:
                    if process.is_alive():
                        process.terminate()
                break
            if not any(process.is_alive() for process in processes):
                break
    for process in processes:
        process.join()
    errors = [result["error"] for result in results if "error" in result]
    if errors or len(results) < len(processes):
        codes = [process.exitcode for process in processes]
        raise MeasureError(f"a worker failed (exit codes {codes}): {(errors or [''])[0]}")
    return results


def collation(config: str, overrides: list[str], max_seconds: float | None) -> dict:
    """Collation rate of one pinned process (module doc, 2)."""
    context = multiprocessing.get_context("spawn")
    queue, cpu = context.Queue(), max(os.sched_getaffinity(0))
    arguments = (config, overrides, cpu, max_seconds, queue)
    return _gather([context.Process(target=collation_worker, args=arguments)], queue)[0]


def shared_memory(config: str, overrides: list[str], ranks: int) -> dict:
    """Data memory of `ranks` processes at once, and of one alone (module doc, 3)."""
    context = multiprocessing.get_context("spawn")

    def job(world_size: int) -> list[dict]:
        queue, barrier = context.Queue(), context.Barrier(world_size)
        processes = [
            context.Process(
                target=rank_worker, args=(config, overrides, rank, world_size, barrier, queue)
            )
            for rank in range(world_size)
        ]
        return sorted(_gather(processes, queue), key=lambda result: result["rank"])

    together, alone = job(ranks), job(1)[0]
    total = {key: sum(rank[key] for rank in together) for key in together[0] if "_kib" in key}
    return {
        "ranks": together,
        "alone": alone,
        "sum_data_mib": total["data_kib"] / 1024,
        "alone_data_mib": alone["data_kib"] / 1024,
        "ratio": total["data_kib"] / max(alone["data_kib"], 1),
        # the parts: memory-mapped token arrays (shared), anonymous memory (each rank's own)
        "sum_cache_pss_mib": total["cache_pss_kib"] / 1024,
        "alone_cache_pss_mib": alone["cache_pss_kib"] / 1024,
        "cache_ratio": total["cache_pss_kib"] / max(alone["cache_pss_kib"], 1),
        "sum_anonymous_mib": total["anonymous_kib"] / 1024,
        "alone_anonymous_mib": alone["anonymous_kib"] / 1024,
    }
