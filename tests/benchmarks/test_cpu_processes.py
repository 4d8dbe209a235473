"""benchmarks/cpu_processes.py: the two commands it compares and the figure it reads back."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks.cpu_processes import command, logged_rate, main


def test_the_threads_run_is_one_process_and_the_processes_run_is_torchrun(tmp_path):
    threads = command("threads", 2, "c.yaml", tmp_path, 100)
    assert threads[:3] == [sys.executable, "-m", "transformer.cli.train"]
    assert "train.num_threads=2" in threads and f"train.output_dir={tmp_path}" in threads
    processes = command("processes", 2, "c.yaml", tmp_path, 100)
    assert processes[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    assert "train.num_threads=1" in processes and "train.max_steps=100" in processes
    # Everything but the launcher and the thread count is the same run.
    same = [a for a in threads if a.startswith("train.") and "num_threads" not in a]
    assert same == [a for a in processes if a.startswith("train.") and "num_threads" not in a]


def _metrics(path: Path, rates: list[float]) -> Path:
    lines = [json.dumps({"type": "train", "tokens_per_second": r}) for r in rates]
    lines.insert(1, json.dumps({"type": "valid", "loss": 3.0}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_rate_is_the_median_without_the_start_up_interval(tmp_path):
    # The first interval (100, start-up) is left out; median of 7000, 8000, 9000.
    assert logged_rate(_metrics(tmp_path / "m.jsonl", [100, 9000, 7000, 8000])) == 8000
    with pytest.raises(ValueError, match="1 training record"):
        logged_rate(_metrics(tmp_path / "one.jsonl", [100]))


@pytest.mark.parametrize("argv", [["--cores", "1"], ["--rounds", "0"], ["--updates", "10"]])
def test_out_of_range_options_are_one_line(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2 and "--cores must be at least 2" in capsys.readouterr().err
