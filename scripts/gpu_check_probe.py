"""Where a GPU update's time goes, for `scripts/gpu_check.py` (issue #13's MFU targets).

Two probes, each run in a worker process (`scripts/gpu_check_worker.py`):

- `UpdateProfiler`: `torch.profiler` over a few updates of a timed training run, after its
  first epoch (every batch shape seen once), written as a table of the kernels that took the
  most device time and a summary: the window's wall time against the time the device was
  busy. A device busy for much less than the wall time waits for the host (Python, kernel
  launches); one that is busy throughout is limited by its kernels.
- `attention_shapes`: multi-head attention's forward and backward pass (bf16, a key padding
  mask, as the encoder runs it) on shapes it has not seen, first call against repeated calls,
  under each SDPA backend the device offers: what a new batch shape costs, and which backend
  serves a padded batch fastest.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from pathlib import Path

import torch

# Self device time of an event, by its name in torch >= 2.4 and before.
_DEVICE_TIME = ("self_device_time_total", "self_cuda_time_total")


def _self_device_us(event) -> float:
    for name in _DEVICE_TIME:
        if hasattr(event, name):
            return float(getattr(event, name))
    return 0.0


class UpdateProfiler:
    """Profile updates [`first`, `first` + `count`) of a run; `at_update(i)` before each fetch.

    Args:
        first: The update (0-based, counted by the caller) at which profiling starts.
        count: How many updates it covers.
        out: Path stem: `<out>.txt` (the table) and `<out>.json` (the summary) are written.
        device: The training device (synchronised at the window's ends).
    """

    def __init__(self, first: int, count: int, out: str, device: torch.device) -> None:
        self.first, self.count, self.out, self.device = first, count, Path(out), device
        self.profile, self.started = None, 0.0
        self.fetched = 0  # updates fetched so far (the index of the next one)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def at_update(self, index: int) -> None:
        """Start the profiler before update `first`; stop and write after the last one."""
        self.fetched = index + 1
        if index == self.first:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if self.device.type == "cuda":
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self._sync()
            self.profile = torch.profiler.profile(activities=activities)
            self.profile.__enter__()
            self.started = time.perf_counter()
        elif index == self.first + self.count:
            self.close(index - self.first)

    def close(self, updates: int | None = None) -> None:
        """Stop and write, if profiling, after `updates` profiled updates (None: the updates
        fetched since `first`, for a run that ended inside the window; its summary says
        `complete: false` if that is fewer than `count`). A profiler left running at exit can
        crash the process."""
        if self.profile is None:
            return
        self._sync()
        wall = time.perf_counter() - self.started
        profile, self.profile = self.profile, None
        profile.__exit__(None, None, None)
        updates = self.fetched - self.first if updates is None else updates
        self._write(profile, wall, updates, complete=updates >= self.count)

    def _write(self, profile, wall: float, count: int, complete: bool = True) -> None:
        averages = list(profile.key_averages())
        # Each kernel's time appears twice: on its own row (device type CUDA) and as the self
        # device time of the operator that launched it. The busy time counts kernel rows only.
        kernels = [e for e in averages if e.device_type == torch.autograd.DeviceType.CUDA]
        operators = [e for e in averages if e.device_type != torch.autograd.DeviceType.CUDA]
        busy_us = sum(_self_device_us(event) for event in kernels)

        def top(events: list) -> list[dict]:
            ranked = sorted(events, key=_self_device_us, reverse=True)[:20]
            return [
                {
                    "name": event.key[:120],
                    "calls_per_update": event.count / count,
                    "self_device_ms_per_update": _self_device_us(event) / 1e3 / count,
                    "share_of_device_time": _self_device_us(event) / busy_us,
                }
                for event in ranked
                if _self_device_us(event) > 0
            ]

        summary = {
            "updates": count,
            "complete": complete,
            "first_update": self.first,
            "wall_seconds_per_update": wall / count,  # the profiler slows the host
            "device_busy_seconds_per_update": busy_us / 1e6 / count,
            "device_busy_share": busy_us / 1e6 / wall if busy_us and wall > 0 else None,
            "top_operators": top(operators),  # the operators whose kernels took the time
            "top_kernels": top(kernels),
        }
        self.out.with_suffix(".json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
        sort = "self_device_time_total" if self.device.type == "cuda" else "self_cpu_time_total"
        try:
            table = profile.key_averages().table(
                sort_by=sort, row_limit=40, max_name_column_width=90
            )
        except Exception as error:  # the summary above is what the check reads
            table = f"(no table: {type(error).__name__}: {error})"
        self.out.with_suffix(".txt").write_text(table, encoding="utf-8")


def _backends(device: torch.device) -> dict:
    """SDPA backend choices to compare: the default, and each fused backend alone."""
    from torch.nn.attention import SDPBackend

    choices = {"default": None}
    if device.type == "cuda":
        for name in ("EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "FLASH_ATTENTION"):
            if hasattr(SDPBackend, name):
                choices[name.lower()] = [getattr(SDPBackend, name)]
    return choices


def attention_shapes(spec_path: str) -> None:
    """Worker command: time attention on new shapes (module doc). SPEC: `device`,
    `precision`, `d_model`, `n_heads`, `tokens` (per batch), `lengths` (one new shape each),
    `repeats`, `result`."""
    from torch.nn.attention import sdpa_kernel

    from transformer.model.attention import MultiHeadAttention

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    device = torch.device(spec["device"])
    dtype = torch.bfloat16 if spec["precision"] == "bf16" else torch.float32
    attention = MultiHeadAttention(spec["d_model"], spec["n_heads"], kernel="sdpa").to(device)
    results: dict = {"settings": {k: v for k, v in spec.items() if k != "result"}}
    for offset, (name, backends) in enumerate(_backends(device).items()):
        rows = []
        for length in spec["lengths"]:
            length += 8 * offset  # a shape this process has not run yet, for each backend
            batch = max(1, spec["tokens"] // length)
            x = torch.randn(batch, length, spec["d_model"], device=device, requires_grad=True)
            mask = torch.zeros(batch, length, dtype=torch.bool, device=device)
            mask[: batch // 2, length - length // 4 :] = True  # half the sentences padded

            try:
                with sdpa_kernel(backends) if backends else contextlib.nullcontext():
                    first = _timed_pass(attention, x, mask, dtype)
                    again = statistics.median(
                        _timed_pass(attention, x, mask, dtype) for _ in range(spec["repeats"])
                    )
                rows.append({"batch": batch, "length": length, "first_s": first, "again_s": again})
            except RuntimeError as error:  # a backend that does not serve this case
                rows.append({"batch": batch, "length": length, "error": str(error)[:200]})
                break
        results[name] = rows
        Path(spec["result"]).write_text(json.dumps(results, indent=2), encoding="utf-8")


def _timed_pass(attention, x: torch.Tensor, mask: torch.Tensor, dtype: torch.dtype) -> float:
    """Seconds of one self-attention forward and backward pass over `x`, synchronised."""
    start = time.perf_counter()
    with torch.autocast(x.device.type, dtype=dtype, enabled=dtype != torch.float32):
        out, _ = attention(x, x, x, key_padding_mask=mask)
    out.float().sum().backward()
    if x.device.type == "cuda":
        torch.cuda.synchronize(x.device)
    return time.perf_counter() - start
