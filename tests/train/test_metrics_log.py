"""Tests for transformer/train/metrics_log.py: the metrics.jsonl log and the training window.

References: `json.loads` of each written line; a plain filter of the records for
`truncate_after`; the window's sums divided by hand (loss per token, ppl = exp(nll per token));
a mirror that keeps the records it is given.
"""

from __future__ import annotations

import json
import math

import pytest

from transformer.train import metrics_log
from transformer.train.metrics_log import MetricsLog, TrainWindow

RECORDS = [
    {"type": "train", "step": 1, "loss": 5.0},
    {"type": "train", "step": 2, "loss": 4.5},
    {"type": "valid", "step": 2, "loss": 4.7, "bleu": 1.5},
    {"type": "train", "step": 3, "loss": 4.0},
    {"type": "train", "step": 4, "loss": 3.5},
    {"type": "valid", "step": 4, "loss": 3.9, "bleu": 3.0},
]


def _log(tmp_path) -> MetricsLog:
    log = MetricsLog(tmp_path / "metrics.jsonl")
    for record in RECORDS:
        log.write(record)
    return log


def test_each_record_is_one_json_line_in_order(tmp_path):
    log = _log(tmp_path)
    lines = log.path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == RECORDS
    assert log.read() == RECORDS


def test_a_missing_file_has_no_records(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl")
    assert log.read() == []
    log.truncate_after(3)  # nothing to truncate, and no file is created
    assert not log.path.exists()


@pytest.mark.parametrize("step", [0, 1, 2, 3, 4, 10])
def test_truncate_after_keeps_exactly_the_records_up_to_step(tmp_path, step):
    log = _log(tmp_path)
    log.truncate_after(step)
    assert log.read() == [r for r in RECORDS if r["step"] <= step]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]  # no temporary
    log.write({"type": "train", "step": step + 1})  # appending continues after the kept ones
    assert log.read()[-1] == {"type": "train", "step": step + 1}


def test_a_line_cut_off_by_a_crash_is_ignored_and_dropped_by_truncation(tmp_path):
    log = _log(tmp_path)
    with open(log.path, "a", encoding="utf-8") as file:
        file.write('{"type": "train", "step": 5, "lo')  # the process died mid-write
    assert log.read() == RECORDS
    log.truncate_after(4)
    assert log.path.read_text(encoding="utf-8").splitlines()[-1] == json.dumps(
        RECORDS[-1], sort_keys=True
    )
    assert log.read() == RECORDS


class ListMirror:
    """A mirror that keeps what it is given."""

    def __init__(self) -> None:
        self.records, self.flushes, self.closed = [], 0, False

    def write(self, record: dict) -> None:
        self.records.append(record)

    def flush(self) -> None:
        self.flushes += 1

    def close(self) -> None:
        self.closed = True


def test_the_mirror_receives_every_record_written_and_is_closed_on_exit(tmp_path):
    mirror = ListMirror()
    with MetricsLog(tmp_path / "metrics.jsonl", mirror) as log:
        for record in RECORDS:
            log.write(record)
        log.flush()
        assert mirror.records == log.read() == RECORDS and mirror.flushes == 1
        assert not mirror.closed
    assert mirror.closed and log.mirror is None
    log.write({"type": "train", "step": 5})  # no longer mirrored; the file still grows
    log.flush()
    assert len(mirror.records) == len(RECORDS) and len(log.read()) == len(RECORDS) + 1


def test_window_record_divides_the_sums_by_the_real_tokens(monkeypatch):
    clock = iter([100.0, 104.0])  # the window opens at 100 s and is recorded at 104 s
    monkeypatch.setattr(metrics_log.time, "monotonic", lambda: next(clock))
    window = TrainWindow()
    window.add(loss_sum=30.0, nll_sum=24.0, tokens=10)
    window.add(loss_sum=18.0, nll_sum=12.0, tokens=6)
    record = window.record(step=7, lr=1e-3)
    assert record == {
        "type": "train",
        "step": 7,
        "loss": pytest.approx(48.0 / 16),
        "nll_loss": pytest.approx(36.0 / 16),
        "ppl": pytest.approx(math.exp(36.0 / 16)),
        "lr": 1e-3,
        "tokens_per_second": pytest.approx(16 / 4.0),
        "target_tokens": 16,
    }


def test_reset_starts_an_empty_window(monkeypatch):
    clock = iter([0.0, 50.0, 52.0])
    monkeypatch.setattr(metrics_log.time, "monotonic", lambda: next(clock))
    window = TrainWindow()
    window.add(10.0, 10.0, 5)
    window.reset()  # at 50 s
    window.add(3.0, 2.0, 4)
    record = window.record(step=2, lr=0.5)
    assert record["loss"] == pytest.approx(3.0 / 4) and record["target_tokens"] == 4
    assert record["tokens_per_second"] == pytest.approx(4 / 2.0)


def test_huge_nll_gives_a_finite_perplexity():
    window = TrainWindow()
    window.add(1e6, 1e6, 1)
    assert math.isfinite(window.record(1, 0.1)["ppl"])


def test_window_mfu_is_the_flops_per_second_over_the_peak(monkeypatch):
    clock = iter([0.0, 4.0, 5.0, 9.0])
    monkeypatch.setattr(metrics_log.time, "monotonic", lambda: next(clock))
    window = TrainWindow()
    window.add(1.0, 1.0, 10, flops=3e12)
    window.add(1.0, 1.0, 10, flops=5e12)
    record = window.record(step=2, lr=0.1, peak_flops=10e12)  # at 4 s
    assert record["mfu"] == pytest.approx(8e12 / 4.0 / 10e12)
    window.reset()  # at 5 s: the FLOPs start again from 0
    window.add(1.0, 1.0, 10, flops=2e12)
    assert "mfu" not in window.record(step=3, lr=0.1)  # at 9 s, no peak known: tokens/s only


def test_summary_is_what_the_records_say(tmp_path):
    """Minutes and steps of the last record, the mean of the training speeds, and the
    validation curve: computed here by hand from the records written."""
    log = MetricsLog(tmp_path / "metrics.jsonl")
    written = [
        {"type": "train", "step": 50, "tokens_per_second": 1000.0, "elapsed_minutes": 0.5},
        {"type": "train", "step": 100, "tokens_per_second": 3000.0, "elapsed_minutes": 1.0},
        {"type": "valid", "step": 100, "loss": 3.5, "bleu": 20.0, "elapsed_minutes": 1.25},
    ]
    for record in written:
        log.write(record)
    assert log.summary() == {
        "train_minutes": 1.25,
        "steps": 100,
        "tokens_per_second": 2000,
        "learning_curve": [{"step": 100, "elapsed_minutes": 1.25, "loss": 3.5, "bleu": 20.0}],
    }


def test_summary_without_a_training_record_has_no_speed(tmp_path):
    """A run shorter than log_interval_steps once reported "throughput 0 target tokens/s"
    (#17, new-user pass): no training record means no speed (None), not zero."""
    log = MetricsLog(tmp_path / "metrics.jsonl")
    log.write({"type": "valid", "step": 17, "loss": 7.0, "elapsed_minutes": 0.5})
    assert log.summary()["tokens_per_second"] is None


def test_summary_of_an_empty_log_names_the_file(tmp_path):
    with pytest.raises(ValueError, match="metrics.jsonl holds no records"):
        MetricsLog(tmp_path / "metrics.jsonl").summary()
