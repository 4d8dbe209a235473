"""Tests for transformer/train/progress.py: the training records and the clock of a run.

References: the sums of the updates written by hand (the window's arithmetic itself is tested
in test_metrics_log.py), and a fake `time.monotonic` for the clock; MFU = FLOPs / seconds /
peak worked out by hand.
"""

from __future__ import annotations

import pytest

from transformer.train import metrics_log, progress
from transformer.train.metrics_log import MetricsLog
from transformer.train.progress import TrainProgress
from transformer.train.update import UpdateResult


@pytest.fixture
def clock(monkeypatch):
    """A settable clock for both modules that read `time.monotonic`."""
    now = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(metrics_log.time, "monotonic", lambda: now[0])
    return now


def _update(loss_sum: float, nll_sum: float, tokens: int) -> UpdateResult:
    return UpdateResult(loss_sum, nll_sum, tokens, flags=[False, False], applied=True)


def test_a_record_covers_the_updates_since_the_previous_one(tmp_path, clock):
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    run = TrainProgress(
        metrics, max_steps=10, step=0, elapsed_seconds=0.0, is_main=True, interactive=True
    )
    run.add(_update(20.0, 16.0, 8))
    clock[0] += 2.0
    run.add(_update(10.0, 8.0, 2))
    run.write(step=2, lr=0.01, epoch=1, skipped_updates=0, grad_norm=None)
    clock[0] += 5.0
    run.add(_update(6.0, 3.0, 3))
    run.write(step=3, lr=0.02, epoch=2, skipped_updates=1, grad_norm=0.5)
    run.close()
    first, second = metrics.read()
    assert (first["step"], first["loss"], first["target_tokens"]) == (2, 30.0 / 10, 10)
    assert first["tokens_per_second"] == pytest.approx(10 / 2.0)
    assert "grad_norm" not in first and first["epoch"] == 1 and first["skipped_updates"] == 0
    assert (second["step"], second["loss"], second["target_tokens"]) == (3, 6.0 / 3, 3)
    assert second["tokens_per_second"] == pytest.approx(3 / 5.0)  # a new window
    assert second["grad_norm"] == 0.5 and second["epoch"] == 2 and second["skipped_updates"] == 1
    assert second["elapsed_minutes"] == pytest.approx(7.0 / 60)


def test_elapsed_time_adds_the_earlier_runs_of_a_resumed_job(tmp_path, clock):
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    run = TrainProgress(
        metrics, max_steps=10, step=4, elapsed_seconds=90.0, is_main=True, interactive=True
    )
    clock[0] += 30.0
    assert run.elapsed() == pytest.approx(120.0)
    assert run.bar.n == 4 and run.bar.total == 10  # the bar starts at the resumed step
    run.add(_update(1.0, 1.0, 1))
    assert run.bar.n == 5
    run.write(step=5, lr=0.1, epoch=1, skipped_updates=0, grad_norm=None)
    run.close()
    assert metrics.read()[0]["elapsed_minutes"] == pytest.approx(2.0)


def test_only_rank_0_writes(tmp_path, clock):
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    run = TrainProgress(metrics, max_steps=3, step=0, elapsed_seconds=0.0, is_main=False)
    run.add(_update(2.0, 2.0, 2))
    run.write(step=1, lr=0.1, epoch=1, skipped_updates=0, grad_norm=None)
    run.close()
    assert not metrics.path.exists() and run.bar.disable


def test_mfu_uses_all_processes_flops_and_peak_and_shows_on_the_bar(tmp_path, clock):
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    run = TrainProgress(
        metrics,
        max_steps=10,
        step=0,
        elapsed_seconds=0.0,
        is_main=True,
        peak_flops=4e12,
        interactive=True,
    )
    run.add(_update(2.0, 2.0, 4), flops=6e12)
    run.add(_update(2.0, 2.0, 4), flops=2e12)
    clock[0] += 4.0
    run.write(step=2, lr=0.1, epoch=1, skipped_updates=0, grad_norm=None)
    assert metrics.read()[0]["mfu"] == pytest.approx(8e12 / 4.0 / 4e12)
    assert run.bar.postfix.endswith("mfu=50.0%") and "tok_s=2" in run.bar.postfix
    run.close()


def test_without_a_peak_a_record_has_tokens_per_second_only(tmp_path, clock):
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    run = TrainProgress(
        metrics, max_steps=10, step=0, elapsed_seconds=0.0, is_main=True, interactive=True
    )
    run.add(_update(2.0, 2.0, 4), flops=6e12)
    clock[0] += 2.0
    run.write(step=1, lr=0.1, epoch=1, skipped_updates=0, grad_norm=None)
    run.close()
    record = metrics.read()[0]
    assert "mfu" not in record and record["tokens_per_second"] == pytest.approx(2.0)
    assert "mfu" not in run.bar.postfix


def test_with_a_time_limit_the_bar_ends_where_the_limit_will_stop_the_run(tmp_path, clock):
    """The 60-minute demo showed 1500/100000 with a 30-hour ETA: now, at 1500 updates in 30
    minutes with 30 minutes left, the run is projected to stop at 3000 (closed form:
    1500 + 30 min x 50 updates/min), after 30 more minutes, by max_minutes."""
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    run = TrainProgress(metrics, 100_000, 0, 0.0, True, max_minutes=60.0, interactive=True)
    for _ in range(1500):
        run.add(_update(1.0, 1.0, 1))
    clock[0] += 30 * 60
    assert run.forecast(1500) == (3000, pytest.approx(30 * 60), "max_minutes")
    run.write(step=1500, lr=0.1, epoch=1, skipped_updates=0, grad_norm=None)
    assert run.bar.total == 3000
    # Far from the time limit, max_steps ends the run first.
    assert run.forecast(99_999)[::2] == (100_000, "max_steps")


def test_without_a_terminal_progress_is_one_line_per_record(tmp_path, clock, capsys):
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    run = TrainProgress(metrics, 10, 0, 0.0, True, interactive=False)
    for step in range(1, 11):
        run.add(_update(2.0, 2.0, 2))
        clock[0] += 1.0
        if step % 5 == 0:
            run.write(step=step, lr=0.1, epoch=1, skipped_updates=0, grad_norm=None)
    run.close()
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines == [
        "step 5/10 (max_steps) loss 1.000 lr 1.00e-01 tok_s 2 elapsed 0:00:05 left 0:00:05",
        "step 10/10 (max_steps) loss 1.000 lr 1.00e-01 tok_s 2 elapsed 0:00:10 left 0:00:00",
    ]
    assert "\r" not in captured.err + captured.out  # no bar
