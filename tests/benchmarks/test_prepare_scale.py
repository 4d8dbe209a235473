"""benchmarks/prepare_scale.py: end to end on a tiny corpus, checked against the prepared data;
its memory readings against mappings and allocations of known size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import make_corpus, prepare_scale
from benchmarks.prepare_scale_measures import rss_kib, tree_rss_kib
from transformer.config import load_config
from transformer.data.prepare import prepare_data

REPO = Path(__file__).resolve().parents[2]
PAIRS, RANKS = 3000, 2
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(report from --json, stdout, work directory) of one run on a 3,000-pair corpus."""
    tmp = tmp_path_factory.mktemp("prepare_scale")
    corpus = ["--pairs", str(PAIRS), "--words", "2000", "--output", str(tmp / "tiny")]
    assert make_corpus.main(corpus) == 0
    command = [sys.executable, "-m", "benchmarks.prepare_scale", "--corpus", str(tmp / "tiny")]
    command += ["--work-dir", str(tmp / "work"), "--ranks", str(RANKS)]
    command += ["--json", str(tmp / "out.json"), "--override", "data.vocab_size=500"]
    done = subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((tmp / "out.json").read_text()), done.stdout, tmp / "work"


def prepared_train(corpus: dict, work: Path):
    """The training pairs as transformer-train's ranks open them (an independent reader)."""
    overrides = [f"data.train={corpus['prefix']}", "data.valid=null", "data.vocab_size=500"]
    config = load_config(REPO / "configs" / "base.yaml", overrides)
    return prepare_data(config.data, work / "run-tiny", log=None, build=False).train


def test_the_report_has_every_figure(run):
    report, _, _ = run
    assert report["command"][:3] == ["python", "-m", "benchmarks.prepare_scale"]
    assert report["cores"] == os.cpu_count() and report["ranks"] == RANKS
    (corpus,) = report["corpora"]
    assert corpus["name"] == "tiny" and corpus["pairs"] == corpus["kept"] == PAIRS
    assert set(corpus["bytes"]) == {"en", "de"} and min(corpus["bytes"].values()) > 0
    first, cached = corpus["prepare"]["first"], corpus["prepare"]["cached"]
    for key in ("seconds", "peak_mib"):
        assert first[key] > 0 and cached[key] > 0
    names = [stage["name"] for stage in first["summary"]["stages"]]
    assert any("SentencePiece" in name for name in names) and "train: encode" in names
    assert all(
        stage["seconds"] >= 0 and stage["peak_mib"] > 0 for stage in first["summary"]["stages"]
    )
    assert cached["summary"]["stages"] == []  # nothing to do the second time
    # the external peak sees at least what the process saw of itself in any stage
    assert first["peak_mib"] >= max(stage["peak_mib"] for stage in first["summary"]["stages"]) - 1
    collation = corpus["collation"]
    assert collation["max_tokens"] == load_config(REPO / "configs" / "base.yaml").train.max_tokens
    assert collation["tgt_tokens_per_second"] > 0 and collation["planning_seconds"] >= 0
    assert len(corpus["shared"]["ranks"]) == RANKS


def test_the_collated_tokens_are_every_kept_target_token_and_one_eos_per_pair(run):
    report, _, work = run
    (corpus,) = report["corpora"]
    train = prepared_train(corpus, work)
    expected = int(train.tgt_lengths.sum(dtype="int64")) + len(train)
    collation, shared = corpus["collation"], corpus["shared"]
    assert collation["whole_epoch"] and collation["batches"] == collation["epoch_batches"]
    assert collation["tgt_tokens"] == expected
    assert collation["src_tokens"] == int(train.src_lengths.sum(dtype="int64"))
    assert (
        shared["alone"]["tgt_tokens"] == expected
        and shared["alone"]["batches"] == collation["batches"]
    )
    ranks = shared["ranks"]
    assert [rank["rank"] for rank in ranks] == list(range(RANKS))
    assert len({rank["batches"] for rank in ranks}) == 1  # the same count on every rank
    usable = collation["batches"] // RANKS * RANKS  # the epoch trimmed to a multiple of ranks
    assert RANKS * ranks[0]["batches"] == usable
    assert sum(rank["tgt_tokens"] for rank in ranks) <= expected


def test_the_ranks_share_the_cache_pages(run):
    report, _, work = run
    shared = report["corpora"][0]["shared"]
    cache_bytes = sum(f.stat().st_size for f in (work / "run-tiny" / "cache").rglob("*.bin"))
    alone = shared["alone"]
    assert alone["cache_pss_kib"] == alone["cache_rss_kib"]  # alone: every page is its own
    assert cache_bytes / 1024 <= alone["cache_mapped_kib"] <= cache_bytes / 1024 + 4 * 12
    total = sum(rank["cache_pss_kib"] for rank in shared["ranks"])
    assert total <= alone["cache_pss_kib"] + 4 * RANKS  # a page counted once in all (rounding)
    assert shared["cache_ratio"] > 0.9  # the ranks together touch (nearly) every page
    for rank in shared["ranks"]:
        assert rank["cache_pss_kib"] < 0.75 * rank["cache_rss_kib"]  # its pages are shared
        assert rank["data_kib"] == rank["anonymous_kib"] + rank["cache_pss_kib"]
    assert shared["ratio"] == pytest.approx(
        sum(rank["data_kib"] for rank in shared["ranks"]) / alone["data_kib"]
    )


def test_stdout_ends_with_a_markdown_summary(run):
    _, stdout, _ = run
    table = stdout[stdout.rindex("\n`python -m benchmarks.prepare_scale") :]
    assert "| corpus | pairs | prepare |" in table and f"| {RANKS} ranks / 1 rank |" in table
    assert "\n| tiny | 3,000 | " in table and "| tiny | train: encode |" in table


READINGS = """
import json, sys
import numpy as np
from benchmarks.prepare_scale_measures import anonymous_kib, mapped_kib
directory, size = sys.argv[1], int(sys.argv[2])
with open(directory + "/data.bin", "wb") as file:
    file.write(bytes(range(256)) * (size // 256) + bytes(size % 256))
mapped = np.memmap(directory + "/data.bin", dtype=np.uint8, mode="r")
before, touched = anonymous_kib(), int(mapped.sum())
array = np.ones(32 << 20, dtype=np.uint8)  # 32 MiB, every page written
print(json.dumps({"mapped": mapped_kib(directory), "anonymous": anonymous_kib() - before}))
"""


def test_the_memory_readings_agree_with_a_known_mapping_and_allocation(tmp_path):
    size = (1 << 20) + 1234  # 1 MiB and part of a page
    done = subprocess.run(
        [sys.executable, "-c", READINGS, str(tmp_path), str(size)],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    readings = json.loads(done.stdout)
    pages_kib = -(-size // 4096) * 4
    assert readings["mapped"] == {"size": pages_kib, "rss": pages_kib, "pss": pages_kib}
    assert 32 * 1024 <= readings["anonymous"] <= 33 * 1024


def test_the_external_peak_counts_the_children(tmp_path):
    """A process whose child holds 64 MiB: the tree's resident memory includes the child's."""
    child = "import time; data = b'x' * (64 << 20); print('ready', flush=True); time.sleep(30)"
    parent = (
        f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {child!r}]); p.wait()"
    )
    process = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "ready\n"
        time.sleep(0.1)
        assert tree_rss_kib(process.pid) >= rss_kib(process.pid) + 64 * 1024
    finally:
        for pid in open(f"/proc/{process.pid}/task/{process.pid}/children").read().split():
            os.kill(int(pid), 15)
        process.wait()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--corpus", "{tmp}/missing"], "--corpus {tmp}/missing: no file {tmp}/missing.en"),
        (["--ranks", "0"], "--ranks (0) must be at least 1"),
        (["--collate-seconds", "0"], "--collate-seconds (0) must be positive"),
        (["--override", "data.train=x"], "--override data.train=x: data.train, data.valid, "),
        (["--override", "data.vocab=3"], "unknown config key data.vocab; valid keys of 'data':"),
        (["--json", "{tmp}/no/out.json"], "--json {tmp}/no/out.json: the directory {tmp}/no "),
        (["--work-dir", "{tmp}/no/work"], "--work-dir {tmp}/no/work: the directory {tmp}/no "),
    ],
)
def test_a_bad_argument_exits_2_with_one_line(tmp_path, capsys, arguments, message):
    for side in ("en", "de"):
        (tmp_path / f"c.{side}").write_text("a b\n")
    given = {"--corpus": str(tmp_path / "c"), "--work-dir": str(tmp_path / "work")}
    given.update(zip(arguments[::2], arguments[1::2], strict=True))
    argv = [part.format(tmp=tmp_path) for item in given.items() for part in item]
    with pytest.raises(SystemExit) as exit_:
        prepare_scale.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and message.format(tmp=tmp_path) in errors[0], err
    assert "Traceback" not in err and not (tmp_path / "work").exists()


def test_a_failed_preparation_is_one_line_and_exit_1(tmp_path, capsys):
    for side in ("en", "de"):
        (tmp_path / f"c.{side}").write_text("a few words here\nand a few more\n" * 20)
    argv = ["--corpus", str(tmp_path / "c"), "--work-dir", str(tmp_path / "work")]
    argv += ["--override", "data.max_len=1", "--override", "data.vocab_size=40"]  # keeps no pair
    assert prepare_scale.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error: transformer-prepare failed (exit 1): " in err, err
    assert f"(log: {tmp_path / 'work' / 'run-c.first.log'})" in err
