"""Tests for transformer/train/trainer.py: the training loop on configs/tiny.yaml and a slice of
Multi30k (CPU, seconds): stop rules, skipped updates, precision and the effective batch.

Resuming is tested in test_checkpoints.py, data parallelism in test_distributed.py, early
stopping in test_validation.py and the command line in tests/cli/test_train.py.
"""

from __future__ import annotations

import pytest
import torch

from transformer.checkpoint import load_checkpoint, read_checkpoint
from transformer.train.nonfinite import NonFiniteLossError
from transformer.train.trainer import Trainer


def test_skip_nonfinite_skips_and_counts(tmp_path, tiny_run, monkeypatch):
    import transformer.train.update as train_step_module

    real_loss, calls = train_step_module.label_smoothed_cross_entropy, []

    def nan_on_second_call(*args, **kwargs):
        out = real_loss(*args, **kwargs)
        calls.append(1)
        return out._replace(loss=out.loss * float("nan")) if len(calls) == 2 else out

    monkeypatch.setattr(train_step_module, "label_smoothed_cross_entropy", nan_on_second_call)
    overrides = [*tiny_run.fast, f"train.output_dir={tmp_path / 'run'}", "train.max_steps=3"]
    state = Trainer(tiny_run.load(overrides + ["train.skip_nonfinite=true"])).train()
    assert state.step == 3 and state.skipped_updates == 1
    records = tiny_run.records(tmp_path / "run")
    assert [r["step"] for r in records] == [1, 2, 3]
    assert records[-1]["skipped_updates"] == 1
    calls.clear()
    config = tiny_run.load(overrides + ["train.skip_nonfinite=false"])
    with pytest.raises(NonFiniteLossError, match="at step 2"):
        Trainer(config, resume=False).train()


def test_bf16_on_cpu_and_keep_last(tmp_path, tiny_run):
    run_dir = tmp_path / "run"
    overrides = [
        *tiny_run.fast,
        f"train.output_dir={run_dir}",
        "train.precision=bf16",
        "train.max_steps=4",
        "train.save_interval_steps=1",
        "train.keep_last=2",
    ]
    trainer = Trainer(tiny_run.load(overrides))
    assert trainer.precision == "bf16"
    state = trainer.train()
    assert state.step == 4 and state.stop_reason == "max_steps"
    numbered = sorted(p.name for p in run_dir.glob("checkpoint_[0-9]*.pt"))
    assert numbered == ["checkpoint_3.pt", "checkpoint_4.pt"]
    assert all(map(lambda r: r["loss"] == r["loss"], tiny_run.records(run_dir)))  # finite


def test_max_minutes_stops_cleanly_with_a_checkpoint(tmp_path, tiny_run):
    run_dir = tmp_path / "run"
    overrides = [
        *tiny_run.fast,
        f"train.output_dir={run_dir}",
        "train.max_minutes=1e-6",
        "train.save_interval_steps=null",
    ]
    state = Trainer(tiny_run.load(overrides)).train()
    assert state.stop_reason == "max_minutes" and state.step == 1
    assert read_checkpoint(run_dir / "checkpoint_last.pt")["step"] == 1
    files = sorted(p.name for p in run_dir.iterdir())
    # Resuming a run whose budget is spent (e.g. rerunning the demo to re-score) trains nothing.
    again = Trainer(tiny_run.load(overrides)).train()
    assert again.stop_reason == "max_minutes" and again.step == 1
    assert sorted(p.name for p in run_dir.iterdir()) == files


def test_tokens_per_update_derives_update_freq(tmp_path, tiny_run, capsys):
    overrides = [
        *tiny_run.fast,
        f"train.output_dir={tmp_path}",
        "train.tokens_per_update=3000",
        "train.max_steps=1",
    ]
    trainer = Trainer(tiny_run.load(overrides), log=print)
    assert trainer.update_freq == 3  # ceil(3000 / 1024)
    assert trainer.batches.batches.max_tokens == 1000  # ceil(3000 / 3): the plan's micro-batch
    trainer.train()
    line = "tokens per update: up to 3,000 per side, padding included (max_tokens 1000 x "
    assert line + "update_freq 3 x 1 process(es)); target train.tokens_per_update 3,000" in (
        capsys.readouterr().out
    )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_with_automatic_precision(tmp_path, tiny_run):
    overrides = [
        *tiny_run.fast,
        f"train.output_dir={tmp_path}",
        "train.device=auto",
        "train.precision=auto",
        "train.max_steps=5",
    ]
    trainer = Trainer(tiny_run.load(overrides))
    assert trainer.device.type == "cuda"
    native_bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
    assert trainer.precision == ("bf16" if native_bf16 else "fp16")
    assert trainer.train().step == 5
    model, _, _ = load_checkpoint(tmp_path / "checkpoint_last.pt", device="cuda")
    assert next(model.parameters()).is_cuda


def test_onednn_linear_kernel_with_bf16_is_refused_before_training(tmp_path, tiny_run):
    overrides = [
        f"train.output_dir={tmp_path}",
        "train.device=cpu",
        "train.precision=bf16",
        "train.linear_kernel=onednn",
    ]
    with pytest.raises(ValueError, match="linear kernel 'onednn'.*bf16 on cpu"):
        Trainer(tiny_run.load(overrides))
    fp32_compiled = overrides[:2] + ["train.precision=fp32", "train.compile=true", overrides[3]]
    with pytest.raises(ValueError, match="fp32 on cpu with torch.compile"):
        Trainer(tiny_run.load(fp32_compiled))
    assert not any(tmp_path.iterdir())  # nothing was prepared or written


def test_an_update_larger_than_an_epoch_is_refused_before_it_fills_memory(tmp_path, tiny_run):
    overrides = [*tiny_run.fast, f"train.output_dir={tmp_path}", "train.tokens_per_update=10**9"]
    overrides[-1] = "train.tokens_per_update=1000000000"
    with pytest.raises(ValueError, match=r"one update needs \d+ micro-batches per process"):
        Trainer(tiny_run.load(overrides))


@pytest.mark.parametrize("keep", [True, False])
def test_cpu_training_keeps_freed_memory_unless_told_not_to(tmp_path, tiny_run, monkeypatch, keep):
    import transformer.train.trainer as trainer_module

    calls = []
    monkeypatch.setattr(trainer_module, "keep_freed_memory", lambda: calls.append(1) or True)
    overrides = [*tiny_run.fast, f"train.output_dir={tmp_path}", "train.max_steps=1"]
    Trainer(tiny_run.load(overrides + [f"train.keep_freed_memory={str(keep).lower()}"]))
    assert calls == ([1] if keep else [])


def test_cpu_training_widens_onednns_cache_before_its_first_product(
    tmp_path, tiny_run, monkeypatch
):
    """oneDNN reads its cache capacity when it builds its first primitive: `use_onednn` (which
    may build one to probe the operator) and every product come after the setting."""
    import transformer.train.trainer as trainer_module

    calls = []
    monkeypatch.setattr(trainer_module, "keep_compiled_products", lambda: calls.append("cache"))
    probe = trainer_module.use_onednn
    monkeypatch.setattr(
        trainer_module, "use_onednn", lambda *a: calls.append("use_onednn") or probe(*a)
    )
    overrides = [*tiny_run.fast, f"train.output_dir={tmp_path}", "train.max_steps=1"]
    Trainer(tiny_run.load(overrides))
    assert calls == ["cache", "use_onednn"]


@pytest.mark.parametrize("clock", [None, 45.0])
def test_a_cooldown_lowers_the_rate_over_the_end_of_the_budget(
    tmp_path, tiny_run, monkeypatch, clock
):
    """The logged rates against noam x the linear factor of the budget spent: 4 steps of a
    max_steps budget, or a clock stopped at 45 of the 60 seconds of `max_minutes` 1."""
    from transformer.train.optim import noam_rate
    from transformer.train.progress import TrainProgress

    overrides = [*tiny_run.fast, f"train.output_dir={tmp_path}", "train.max_steps=4"]
    overrides += ["train.cooldown_fraction=0.5"]
    if clock is not None:
        monkeypatch.setattr(TrainProgress, "elapsed", lambda self: clock)
        overrides += ["train.max_minutes=1"]
    config = tiny_run.load(overrides)
    Trainer(config).train()
    train, d_model = config.train, config.model.d_model
    expected = []
    for n in range(1, 5):
        spent = (n - 1) / 4 if clock is None or n == 1 else max((n - 1) / 4, clock / 60)
        rate = noam_rate(n, d_model, train.warmup_steps, train.lr_scale)
        expected.append(rate * min(1.0, (1 - spent) / 0.5))
    assert [r["lr"] for r in tiny_run.records(tmp_path)] == pytest.approx(expected, rel=1e-12)
