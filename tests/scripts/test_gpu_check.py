"""Tests for scripts/gpu_check.sh and its modules (gpu_check.py, gpu_check_steps.py,
gpu_check_figures.py, gpu_check_worker.py).

The GPU check runs on a lent machine that has no `datasets` and no network; here its dry run
(the same steps, tiny, on the CPU) runs once, with `import datasets` made to fail as it does
there, and the tests read the JSON it wrote. The figures' arithmetic is tested on made-up
timings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from scripts import gpu_check_figures as figures

REPO = Path(__file__).resolve().parents[2]
STEPS = [
    "f_versions",
    "install",
    "a_pytest_gpu",
    "b_resume",
    "c_base_eager",
    "c_base_compile",
    "d_big_eager",
    "e_decode",
    "g_attention_shapes",
    "d_big_compile",
]


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    """Run `gpu_check.sh --dry-run` on synthetic text with `datasets` unimportable."""
    root = tmp_path_factory.mktemp("gpu_check")
    blocker = root / "blocked" / "datasets"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text('raise ImportError("no datasets on the GPU machine")\n')
    path = os.pathsep.join(filter(None, [str(blocker.parent), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHON=sys.executable, PYTHONPATH=path, OMP_NUM_THREADS="1")
    argv = ["bash", "scripts/gpu_check.sh", "--dry-run", "--data", "synthetic"]
    (root / "out").mkdir()  # as $OUT exists on the device machine
    argv += ["--out", str(root / "out" / "gpu_check.json"), "--work-dir", str(root / "work")]
    done = subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    report = json.loads((root / "out" / "gpu_check.json").read_text(encoding="utf-8"))
    return done, report


@pytest.mark.slow
def test_the_dry_run_runs_every_step_and_writes_the_json(dry_run):
    done, report = dry_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert report["dry_run"] is True and report["finished"] is True
    assert list(report["steps"]) == STEPS
    statuses = {key: entry["status"] for key, entry in report["steps"].items()}
    assert statuses == {
        key: "skipped" if key in ("install", "a_pytest_gpu") else "ok" for key in STEPS
    }
    assert report["steps"]["a_pytest_gpu"]["reason"].startswith("dry run")
    assert report["data"]["real"] is False and report["data"]["pairs"]["news/train"] > 0
    assert "[gpu-check] (c) base eager: ok" in done.stdout
    assert Path(report["steps"]["f_versions"]["result"]["executable"]).name.startswith("python")
    assert (Path(done.args[-3]).with_suffix(".log")).is_file()


@pytest.mark.slow
def test_the_dry_run_resumes_bit_identically_through_a_process_group(dry_run):
    result = dry_run[1]["steps"]["b_resume"]["result"]
    assert result["bit_identical"] is True and result["different_tensors"] == []
    assert result["updates"] == {"whole": 6, "stopped_at": 3, "resumed_to": 6}
    assert result["process_group"] == "gloo"  # torchrun with one process: through the group
    assert any("resumed from" in line for line in result["trainer_says"])


@pytest.mark.slow
def test_the_dry_run_times_training_and_decoding(dry_run):
    steps = dry_run[1]["steps"]
    for key in ("c_base_eager", "d_big_eager", "c_base_compile", "d_big_compile"):
        result = steps[key]["result"]
        assert result["finished"] and result["stop_reason"] == "max_steps", key
        steady = result["steady_state"]
        assert steady["steady_updates"] >= 1 and steady["target_tokens_per_second"] > 0
        assert 0 <= steady["batch_wait_share"] < 1 and steady["model_tflops_per_second"] > 0
        assert "mfu" not in steady and result["peak_flops"] is None  # no GPU: no peak
    assert (
        steps["d_big_eager"]["result"]["parameters"] > steps["c_base_eager"]["result"]["parameters"]
    )
    assert steps["c_base_compile"]["result"]["compile"] is True
    assert steps["c_base_compile"]["result"]["environment"] == {"TORCH_COMPILE_DISABLE": "1"}
    decoded = steps["e_decode"]["result"]
    assert decoded["sentences"] == dry_run[1]["data"]["pairs"]["wmt14-en-de/newstest2014"]
    assert decoded["settings"]["beam_size"] == 4 and decoded["settings"]["length_penalty"] == 0.6
    fp32 = decoded["by_precision"]["fp32"]
    assert fp32["sentences_per_second"] > 0 and fp32["target_tokens"] > 0
    assert 0 <= fp32["outputs_at_max_length"] <= decoded["sentences"]
    assert "c_base_eager" in decoded["model"]


@pytest.mark.slow
def test_the_dry_run_profiles_updates_and_times_attention_on_new_shapes(dry_run):
    steps = dry_run[1]["steps"]
    for key in ("c_base_eager", "d_big_eager", "c_base_compile", "d_big_compile"):
        profile = steps[key]["result"]["profile"]  # the window closed inside the run
        assert profile["complete"] is True and profile["updates"] == 2, key
        assert profile["wall_seconds_per_update"] > 0
        assert profile["device_busy_share"] is None  # no device kernels on the CPU
    attention = steps["g_attention_shapes"]["result"]
    rows = attention["default"]  # the CPU offers the default backend only
    assert [row["length"] for row in rows] == attention["settings"]["lengths"]
    assert all(row["first_s"] > 0 and row["again_s"] > 0 for row in rows)


@pytest.mark.slow
def test_the_dry_run_works_without_datasets(dry_run):
    versions = dry_run[1]["steps"]["f_versions"]["result"]
    assert versions["datasets_importable"] is False  # the blocker reached every process
    assert versions["optional_modules_loaded_by_cli_train"] == []


def test_importing_the_training_cli_loads_no_optional_package():
    code = (
        "import sys, transformer.cli.train; "
        "print([m for m in ('datasets', 'transformers', 'matplotlib') if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_shell_scripts_parse():
    for script in ("gpu_check.sh", "gpu_check_data.sh"):
        subprocess.run(["bash", "-n", str(REPO / "scripts" / script)], check=True)


def _timings(seconds: list[float], wait: float = 0.01) -> list[dict]:
    """Per-update lines as the worker writes them: 100 target tokens, 1e9 FLOPs each."""
    lines, t = [], 0.0
    for duration in seconds:
        lines.append({"t": t, "wait": wait, "n_src": 90, "n_tgt": 100, "flops": 1e9})
        t += duration
    return lines


def test_training_figures_leave_out_the_warmup_and_slow_updates():
    # 2 warm-up updates (5 s, 3 s), then 1 s updates with one recompilation (9 s); the last
    # line only closes the update before it.
    timings = _timings([5.0, 3.0, 1.0, 1.0, 9.0, 1.0, 1.0, 0.0])
    got = figures.training_figures(timings, warmup=2, peak_flops=2e9)
    assert got["updates_timed"] == 7 and got["steady_updates"] == 4
    assert got["slow_updates_left_out"] == 1 and got["median_update_seconds"] == 1.0
    assert got["warmup_seconds"] == pytest.approx(4.0 + 2.0 + 8.0)
    assert got["target_tokens_per_second"] == pytest.approx(100.0)
    assert got["batch_wait_share"] == pytest.approx(0.01)
    assert got["mfu"] == pytest.approx(0.5)  # 1e9 FLOPs per second of a 2e9 peak
    assert "mfu" not in figures.training_figures(timings, warmup=2, peak_flops=None)
    assert "note" in figures.training_figures(timings[:2], warmup=2, peak_flops=None)


def test_read_timings_stops_at_a_line_cut_off(tmp_path):
    path = tmp_path / "timings.jsonl"
    path.write_text('{"t": 0}\n{"t": 1}\n{"t": ', encoding="utf-8")
    assert figures.read_timings(path) == [{"t": 0}, {"t": 1}]
    assert figures.read_timings(tmp_path / "missing.jsonl") == []


def test_synthetic_data_has_the_data_folder_layout(tmp_path):
    figures.write_synthetic(tmp_path, (30, 20, 10))
    assert figures.has_data(tmp_path)
    for name, count in zip(figures.DATA_FILES, (30, 20, 10), strict=True):
        en = (tmp_path / f"{name}.en").read_text(encoding="utf-8").splitlines()
        de = (tmp_path / f"{name}.de").read_text(encoding="utf-8").splitlines()
        assert len(en) == len(de) == count and all(en) and all(de)
    (tmp_path / "news" / "train.de").unlink()
    assert not figures.has_data(tmp_path)


def test_gpu_test_files_are_the_files_with_gpu_tests():
    files = figures.gpu_test_files(REPO / "tests")
    assert "tests/train/test_trainer.py" in files and "tests/decode/test_beam_search.py" in files
    assert "tests/data/test_corpus.py" not in files  # imports datasets; has no GPU test


def test_junit_summary_counts_outcomes(tmp_path):
    path = tmp_path / "report.xml"
    path.write_text(
        '<testsuites><testsuite tests="3" failures="1" errors="0" skipped="1">'
        '<testcase classname="a" name="ok"/>'
        '<testcase classname="a" name="bad"><failure message="x"/></testcase>'
        '<testcase classname="b" name="gpu"><skipped/></testcase>'
        "</testsuite></testsuites>",
        encoding="utf-8",
    )
    got = figures.junit_summary(path)
    assert (got["tests"], got["failures"], got["skipped"]) == (3, 1, 1)
    assert got["outcomes"] == {"a::ok": "passed", "a::bad": "failure", "b::gpu": "skipped"}
    assert figures.junit_summary(tmp_path / "missing.xml") == {}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--steps", "zzz"], "unknown step 'zzz'"),
        (["--steps", ","], "unknown step ''"),
        (["--budget-s", "0"], "must be positive"),
        (["--out", "/nonexistent/x.json"], "a .json file in an existing directory"),
    ],
)
def test_arguments_that_would_check_nothing_are_refused(tmp_path, capsys, args, message):
    from scripts import gpu_check

    argv = ["--dry-run", "--out", str(tmp_path / "g.json"), *args]
    with pytest.raises(SystemExit) as exit_:
        gpu_check.main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "g.json").exists()


def test_the_profile_counts_each_kernel_once(tmp_path):
    """A kernel's time is on its own row and again as the self device time of the operator
    that launched it (as torch.profiler's key_averages gives them): busy time = kernel rows."""
    import torch

    from scripts.gpu_check_probe import UpdateProfiler

    def event(key, device_type, self_us, count=1):
        return SimpleNamespace(
            key=key, device_type=device_type, self_device_time_total=self_us, count=count
        )

    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU
    rows = [
        event("aten::mm", cpu, 600.0, 4),
        event("gemm_kernel", cuda, 600.0, 4),
        event("aten::add_", cpu, 200.0, 2),
        event("add_kernel", cuda, 200.0, 2),
        event("aten::view", cpu, 0.0, 9),
    ]

    class Profile:
        def key_averages(self):
            return _Averages(rows)

    profiler = UpdateProfiler(first=3, count=2, out=str(tmp_path / "p"), device=torch.device("cpu"))
    profiler._write(Profile(), wall=0.002, count=2)
    summary = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
    assert summary["device_busy_seconds_per_update"] == pytest.approx(400e-6)  # 800 us / 2
    assert summary["device_busy_share"] == pytest.approx(0.4)
    assert [row["name"] for row in summary["top_kernels"]] == ["gemm_kernel", "add_kernel"]
    assert [row["name"] for row in summary["top_operators"]] == ["aten::mm", "aten::add_"]
    assert summary["top_kernels"][0]["share_of_device_time"] == pytest.approx(0.75)
    assert summary["top_kernels"][0]["calls_per_update"] == 2


def test_a_profile_cut_short_divides_by_the_updates_it_saw(tmp_path, monkeypatch):
    """A run that ends inside the window (2 of 5 planned updates) reports per-update figures
    over the 2 updates profiled, marked incomplete; a run that ends after the window's last
    update, or goes on past it, reports over all 5."""
    import torch

    from scripts import gpu_check_probe
    from scripts.gpu_check_probe import UpdateProfiler

    rows = [
        SimpleNamespace(
            key="k",
            device_type=torch.autograd.DeviceType.CUDA,
            self_device_time_total=1000.0,
            count=2,
        )
    ]

    class Profile:
        def __enter__(self):
            return self

        def __exit__(self, *exc_info):
            return None

        def key_averages(self):
            return _Averages(rows)

    monkeypatch.setattr(gpu_check_probe.torch.profiler, "profile", lambda **kwargs: Profile())
    cpu = torch.device("cpu")
    for fetched, expected_updates, complete in ((5, 2, False), (8, 5, True), (9, 5, True)):
        out = tmp_path / f"p{fetched}"
        profiler = UpdateProfiler(first=3, count=5, out=str(out), device=cpu)
        for index in range(fetched):
            profiler.at_update(index)
        profiler.close()
        summary = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
        assert summary["updates"] == expected_updates and summary["complete"] is complete
        assert summary["device_busy_seconds_per_update"] == pytest.approx(1e-3 / expected_updates)


class _Averages(list):
    """key_averages' result: a list of events with a `table` method."""

    def table(self, **kwargs) -> str:
        return "table"
