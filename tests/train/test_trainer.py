"""End-to-end training on a slice of Multi30k with configs/tiny.yaml (CPU, seconds).

Real subprocesses for the resume test (kill -9) and the 2-process gloo DDP test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint
from transformer.cli.train import main
from transformer.config import load_config
from transformer.train.trainer import NonFiniteLossError, Trainer

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
# Small, fast runs: no validation unless a test asks for it, one thread, every step logged.
FAST = [
    "data.valid=null",
    "train.log_interval_steps=1",
    "train.num_threads=1",
]


def _env(shared_data: Path) -> dict:
    env = dict(os.environ)
    env.update(TRANSFORMER_DATA_DIR=str(shared_data), OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _train_records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["type"] == "train"]


def _run(args: list[str], shared_data: Path, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, *args], env=_env(shared_data), capture_output=True, text=True, cwd=REPO
    )
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def test_tiny_config_trains_and_the_loss_falls(tmp_path, shared_data, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    run_dir = tmp_path / "run"
    code = main(
        ["--config", str(TINY), f"train.output_dir={run_dir}", "train.valid_bleu_sentences=20"]
    )
    assert code == 0
    records = _train_records(run_dir)
    assert records[-1]["step"] == 100
    assert records[-1]["loss"] < records[0]["loss"] - 1.0
    for record in records:
        assert {"step", "loss", "lr", "tokens_per_second"} <= record.keys()
    valid = [
        r
        for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
        if r["type"] == "valid"
    ]
    assert [r["step"] for r in valid] == [50, 100]
    assert valid[-1]["loss"] < valid[0]["loss"]
    assert {"bleu", "ppl", "elapsed_minutes"} <= valid[-1].keys()
    names = {p.name for p in run_dir.iterdir()}
    assert {"config.yaml", "spm.model", "checkpoint_last.pt", "checkpoint_best.pt"} <= names
    assert {"checkpoint_50.pt", "checkpoint_100.pt"} <= names
    assert load_config(run_dir / "config.yaml").model.vocab_size == 1000
    checkpoint = torch.load(run_dir / "checkpoint_last.pt", weights_only=True)
    assert checkpoint["step"] == 100
    assert not any(k.startswith(("module.", "_orig_mod.")) for k in checkpoint["model"])


KILL_AT_STEP_5 = """
import os, signal, sys
from transformer.train.run_directory import RunDirectory
from transformer.cli.train import main

save = RunDirectory.save

def save_then_die(self, state, step, *args, **kwargs):
    save(self, state, step, *args, **kwargs)
    if step == 5:
        os.kill(os.getpid(), signal.SIGKILL)

RunDirectory.save = save_then_die
sys.exit(main(sys.argv[1:]))
"""


def test_kill_9_and_resume_is_bit_identical(tmp_path, shared_data):
    common = ["--config", str(TINY), *FAST, "train.max_steps=10", "train.save_interval_steps=5"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    _run(["-m", "transformer.train", *common, f"train.output_dir={straight}"], shared_data)
    killed = _run(
        ["-c", KILL_AT_STEP_5, *common, f"train.output_dir={resumed}"], shared_data, False
    )
    assert killed.returncode == -9, killed.stderr
    assert read_checkpoint(resumed / "checkpoint_last.pt")["step"] == 5
    _run(["-m", "transformer.train", *common, f"train.output_dir={resumed}"], shared_data)

    a = read_checkpoint(straight / "checkpoint_last.pt")
    b = read_checkpoint(resumed / "checkpoint_last.pt")
    assert a["step"] == b["step"] == 10
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    for key, value in a["optimizer"]["state"][0].items():
        assert torch.equal(value, b["optimizer"]["state"][0][key]), key
    steps = lambda records: [(r["step"], r["loss"], r["lr"]) for r in records]  # noqa: E731
    assert steps(_train_records(straight)) == steps(_train_records(resumed))
    assert [r["step"] for r in _train_records(resumed)] == list(range(1, 11))


def test_two_gloo_processes_match_one_process_with_update_freq_2(tmp_path, shared_data):
    common = ["--config", str(TINY), *FAST, "train.max_steps=3", "model.dropout=0.0"]
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    _run(
        ["-m", "transformer.train", *common, "train.update_freq=2", f"train.output_dir={single}"],
        shared_data,
    )
    _run(
        [
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "transformer.train",
            *common,
            f"train.output_dir={ddp}",
        ],
        shared_data,
    )
    a = read_checkpoint(single / "checkpoint_last.pt")
    b = read_checkpoint(ddp / "checkpoint_last.pt")
    assert b["world_size"] == 2 and len(b["rng"]) == 2
    for key, value in a["model"].items():
        assert torch.allclose(value, b["model"][key], atol=1e-5, rtol=0), key
    for x, y in zip(_train_records(single), _train_records(ddp), strict=True):
        assert x["loss"] == pytest.approx(y["loss"], rel=1e-6)
        assert x["target_tokens"] == y["target_tokens"]


def test_nonfinite_loss_stops_with_the_step_and_keeps_the_last_checkpoint(
    tmp_path, shared_data, monkeypatch, capsys
):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    run_dir = tmp_path / "run"
    # A huge rate blows the weights up after the first update, so step 2's loss is not finite.
    args = [
        "--config",
        str(TINY),
        *FAST,
        f"train.output_dir={run_dir}",
        "train.lr_scale=1e30",
        "train.save_interval_steps=1",
        "train.max_steps=5",
    ]
    assert main(args) == 1
    error = capsys.readouterr().err
    assert "non-finite loss" in error and "at step 2" in error and "checkpoint_last.pt" in error
    assert read_checkpoint(run_dir / "checkpoint_last.pt")["step"] == 1


def test_skip_nonfinite_skips_and_counts(tmp_path, shared_data, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    import transformer.train.update as train_step_module

    real_loss, calls = train_step_module.label_smoothed_cross_entropy, []

    def nan_on_second_call(*args, **kwargs):
        out = real_loss(*args, **kwargs)
        calls.append(1)
        return out._replace(loss=out.loss * float("nan")) if len(calls) == 2 else out

    monkeypatch.setattr(train_step_module, "label_smoothed_cross_entropy", nan_on_second_call)
    overrides = [*FAST, f"train.output_dir={tmp_path / 'run'}", "train.max_steps=3"]
    config = load_config(TINY, overrides + ["train.skip_nonfinite=true"])
    state = Trainer(config).train()
    assert state.step == 3 and state.skipped_updates == 1
    records = _train_records(tmp_path / "run")
    assert [r["step"] for r in records] == [1, 2, 3]
    assert records[-1]["skipped_updates"] == 1
    calls.clear()
    config = load_config(TINY, overrides + ["train.skip_nonfinite=false"])
    with pytest.raises(NonFiniteLossError, match="at step 2"):
        Trainer(config, resume=False).train()


def test_unknown_key_and_wrong_type_are_reported(tmp_path, capsys):
    assert main(["--config", str(TINY), "train.max_stepz=3"]) == 2
    error = capsys.readouterr().err
    assert "train.max_stepz" in error and "max_steps" in error and "warmup_steps" in error
    assert main(["--config", str(TINY), "train.max_steps=many"]) == 2
    assert "train.max_steps" in capsys.readouterr().err


def test_bf16_on_cpu_and_keep_last(tmp_path, shared_data, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    run_dir = tmp_path / "run"
    overrides = [
        *FAST,
        f"train.output_dir={run_dir}",
        "train.precision=bf16",
        "train.max_steps=4",
        "train.save_interval_steps=1",
        "train.keep_last=2",
    ]
    trainer = Trainer(load_config(TINY, overrides))
    assert trainer.precision == "bf16"
    state = trainer.train()
    assert state.step == 4 and state.stop_reason == "max_steps"
    numbered = sorted(p.name for p in run_dir.glob("checkpoint_[0-9]*.pt"))
    assert numbered == ["checkpoint_3.pt", "checkpoint_4.pt"]
    assert all(map(lambda r: r["loss"] == r["loss"], _train_records(run_dir)))  # finite


def test_max_minutes_stops_cleanly_with_a_checkpoint(tmp_path, shared_data, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    run_dir = tmp_path / "run"
    overrides = [
        *FAST,
        f"train.output_dir={run_dir}",
        "train.max_minutes=1e-6",
        "train.save_interval_steps=null",
    ]
    state = Trainer(load_config(TINY, overrides)).train()
    assert state.stop_reason == "max_minutes" and state.step == 1
    assert read_checkpoint(run_dir / "checkpoint_last.pt")["step"] == 1
    files = sorted(p.name for p in run_dir.iterdir())
    # Resuming a run whose budget is spent (e.g. rerunning the demo to re-score) trains nothing.
    again = Trainer(load_config(TINY, overrides)).train()
    assert again.stop_reason == "max_minutes" and again.step == 1
    assert sorted(p.name for p in run_dir.iterdir()) == files


def test_tokens_per_update_derives_update_freq(tmp_path, shared_data, monkeypatch, capsys):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    overrides = [
        *FAST,
        f"train.output_dir={tmp_path}",
        "train.tokens_per_update=3000",
        "train.max_steps=1",
    ]
    trainer = Trainer(load_config(TINY, overrides), log=print)
    assert trainer.update_freq == 3  # ceil(3000 / 1024)
    trainer.train()
    assert "effective tokens per update: up to 3,072" in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_with_automatic_precision(tmp_path, shared_data, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    overrides = [
        *FAST,
        f"train.output_dir={tmp_path}",
        "train.device=auto",
        "train.precision=auto",
        "train.max_steps=5",
    ]
    trainer = Trainer(load_config(TINY, overrides))
    assert trainer.device.type == "cuda"
    assert trainer.precision == ("bf16" if torch.cuda.is_bf16_supported() else "fp32")
    assert trainer.train().step == 5
    model, _, _ = load_checkpoint(tmp_path / "checkpoint_last.pt", device="cuda")
    assert next(model.parameters()).is_cuda


def test_output_dir_under_a_regular_file_names_train_output_dir(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    argv = ["--config", str(TINY), f"train.output_dir={blocker / 'run'}", "train.device=cpu"]
    assert main(argv) == 1  # the work cannot be done (one line, no usage)
    error = capsys.readouterr().err.strip()
    assert error.startswith("transformer-train: error: train.output_dir")
    assert "cannot be created" in error and "\n" not in error


def test_early_stopping_after_patience_validations_without_improvement(
    tmp_path, shared_data, monkeypatch
):
    from transformer.train import validation

    losses = iter([3.0, 3.5, 3.2, 2.0, 1.0])  # best at the first validation, then two worse
    monkeypatch.setattr(
        validation.Validator, "validate", lambda self, model: {"loss": next(losses)}
    )
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    run_dir = tmp_path / "run"
    overrides = [
        "train.log_interval_steps=1",
        "train.num_threads=1",
        f"train.output_dir={run_dir}",
        "train.max_steps=20",
        "train.validate_interval_steps=1",
        "train.best_metric=loss",
        "train.early_stop_patience=2",
        "train.save_interval_steps=null",
    ]
    state = Trainer(load_config(TINY, overrides)).train()
    assert state.stop_reason == "early_stopping"
    assert state.step == 3 and state.best_step == 1


def test_fresh_start_sets_the_earlier_run_aside(tmp_path, shared_data, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    run_dir = tmp_path / "run"
    common = [*FAST, f"train.output_dir={run_dir}", "train.save_interval_steps=1"]
    Trainer(load_config(TINY, [*common, "train.max_steps=4"])).train()
    Trainer(load_config(TINY, [*common, "train.max_steps=2"]), resume=False).train()
    numbered = sorted(p.name for p in run_dir.glob("checkpoint_[0-9]*.pt"))
    assert numbered == ["checkpoint_1.pt", "checkpoint_2.pt"]  # nothing left from the first run
    (aside,) = run_dir.glob("previous-*")
    assert (aside / "checkpoint_4.pt").is_file() and (aside / "metrics.jsonl").is_file()
    assert [r["step"] for r in _train_records(run_dir)] == [1, 2]


def test_onednn_linear_kernel_with_bf16_is_refused_before_training(tmp_path):
    overrides = [
        f"train.output_dir={tmp_path}",
        "train.device=cpu",
        "train.precision=bf16",
        "train.linear_kernel=onednn",
    ]
    with pytest.raises(ValueError, match="linear kernel 'onednn'.*bf16 on cpu"):
        Trainer(load_config(TINY, overrides))
    fp32_compiled = overrides[:2] + ["train.precision=fp32", "train.compile=true", overrides[3]]
    with pytest.raises(ValueError, match="fp32 on cpu with torch.compile"):
        Trainer(load_config(TINY, fp32_compiled))
    assert not any(tmp_path.iterdir())  # nothing was prepared or written


def test_resuming_from_an_averaged_checkpoint_is_a_clear_error(tmp_path, shared_data, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    run_dir = tmp_path / "run"
    overrides = [*FAST, f"train.output_dir={run_dir}", "train.max_steps=2"]
    Trainer(load_config(TINY, overrides)).train()
    state = read_checkpoint(run_dir / "checkpoint_last.pt")
    for key in ("optimizer", "lr_scheduler", "data_position", "train_state"):
        del state[key]  # what transformer-average keeps: weights, configs, vocabulary
    save_checkpoint(state, run_dir / "checkpoint_last.pt")
    with pytest.raises(ValueError, match=r"checkpoint_last\.pt cannot be resumed: it has no "):
        Trainer(load_config(TINY, [*overrides, "train.max_steps=3"]))
