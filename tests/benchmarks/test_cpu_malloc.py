"""benchmarks/cpu_malloc.py: both malloc settings time the same trainer updates, alternated."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import cpu_malloc
from transformer.cpu import malloc

CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml")
TINY = ["--config", CONFIG, "--threads", "1", "--warmup", "1"]


@pytest.mark.skipif(malloc._glibc() is None, reason="the C library is not glibc")
def test_the_settings_alternate_round_by_round_on_the_same_batches(tiny_run, monkeypatch):
    calls, updates = [], []
    for name, setting in list(cpu_malloc.SETTINGS.items()):
        monkeypatch.setitem(
            cpu_malloc.SETTINGS, name, lambda n=name, s=setting: calls.append(n) or s()
        )
    real_timed = cpu_malloc.timed_updates

    def spy(trainer, block):
        updates.append([id(micro_batches) for micro_batches in block])
        return real_timed(trainer, block)

    monkeypatch.setattr(cpu_malloc, "timed_updates", spy)
    results = cpu_malloc.run(CONFIG, [], threads=1, rounds=2, updates=2, warmup=1)
    assert calls == ["glibc", "keep", "keep", "glibc"]  # AB, then BA
    assert updates[0] == updates[1] and updates[2] == updates[3] != updates[0]
    assert len(updates[0]) == 2
    for rows in results.values():
        assert len(rows) == 2
        assert all(r["tokens_per_second"] > 0 and r["faults"] >= 0 for r in rows)
    table = cpu_malloc.report(results).splitlines()
    assert [line.split()[0] for line in table[1:3]] == ["glibc", "keep"]


@pytest.mark.skipif(malloc._glibc() is None, reason="the C library is not glibc")
def test_the_script_prints_a_row_per_setting(tiny_run, capsys):
    assert cpu_malloc.main([*TINY, "--rounds", "1", "--updates", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-4].startswith("setting") and out[-3].startswith("glibc")
    assert out[-2].startswith("keep") and out[-1].startswith("keep / glibc")


def test_another_c_library_is_an_error_message(monkeypatch, capsys):
    monkeypatch.setattr(malloc, "_glibc", lambda: None)
    assert cpu_malloc.main([*TINY, "--rounds", "1"]) == 1
    assert "not glibc" in capsys.readouterr().out
