"""benchmarks/cpu_epochs.py: the commands and environments of its settings, and its launcher."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.cpu_epochs import TRIMMING_LAUNCHER, command, environment, main
from transformer.cpu.malloc import _glibc


def test_every_setting_is_the_demos_training_processes_and_only_before_uses_the_launcher(
    tmp_path,
):
    runs = {s: command(s, 2, "c.yaml", tmp_path / s, 300) for s in ("before", "no-trim", "after")}
    for argv in runs.values():
        assert argv[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
        assert "train.num_threads=1" in argv and "train.max_steps=300" in argv
    assert runs["after"][5:7] == ["-m", "transformer.cli.train"] == runs["no-trim"][5:7]
    assert runs["before"][5] == str(tmp_path / "trimming_launcher_before.py")
    # Apart from the launcher and the run directory, the same run.
    same = [[a for a in argv[5:] if "output_dir" not in a][-8:] for argv in runs.values()]
    assert same[0] == same[1] == same[2]


def test_only_after_leaves_the_cache_capacity_to_the_trainer(monkeypatch):
    monkeypatch.setenv("DNNL_PRIMITIVE_CACHE_CAPACITY", "7")  # a user's value is not measured
    assert environment("before")["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "1024"
    assert environment("no-trim")["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "1024"
    after = environment("after")
    assert "ONEDNN_PRIMITIVE_CACHE_CAPACITY" not in after
    assert "DNNL_PRIMITIVE_CACHE_CAPACITY" not in after


@pytest.mark.skipif(_glibc() is None, reason="the C library is not glibc")
def test_the_launcher_trims_a_kept_heap_as_the_trainer_did_before():
    patch = TRIMMING_LAUNCHER.split("from transformer.cli.train")[0]
    check = (
        "from transformer.cpu.malloc import keep_freed_memory\n"
        "from transformer.data.heap import release_free_memory\n"
        "assert keep_freed_memory()\n"
        "print(release_free_memory())\n"
    )
    plain = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    patched = subprocess.run([sys.executable, "-c", patch + check], capture_output=True, text=True)
    assert plain.stdout.split() == ["False"]  # the trainer now: a kept heap is not trimmed
    assert patched.stdout.split() == ["True"]


def test_the_launcher_runs_the_training_command():
    done = subprocess.run(
        [sys.executable, "-c", TRIMMING_LAUNCHER, "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "--config" in done.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rounds", "0"], "--rounds must be at least 1"),
        (["--updates", "10"], "--updates at least 50"),
        (["--settings", "after"], "--settings: 'before' and any of no-trim, after"),
        (["--settings", "before,fast"], "--settings: 'before'"),
    ],
)
def test_out_of_range_options_are_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err
