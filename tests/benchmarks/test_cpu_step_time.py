"""benchmarks/cpu_step_time.py: its linear-kernel and dropout axes swap the layers as the trainer
would."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from torch import nn

from benchmarks import cpu_step_time
from transformer.config import Config
from transformer.cpu.dropout import CPUDropout
from transformer.cpu.onednn import OneDNNLinear, use_onednn
from transformer.model.config import ModelConfig
from transformer.model.transformer import Transformer

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "multi30k.yaml"
TINY = dict(d_model=16, d_ff=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1)


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("linear", ["torch", "auto"])
@pytest.mark.parametrize("dropout", ["torch", "cpu"])
def test_make_step_swaps_the_layers_where_the_trainer_would(monkeypatch, linear, bf16, dropout):
    built = []

    def spy(model_config):
        built.append(Transformer(model_config))
        return built[-1]

    monkeypatch.setattr(cpu_step_time, "Transformer", spy)
    config = Config()
    config = dataclasses.replace(config, model=dataclasses.replace(config.model, **TINY))
    g = torch.Generator().manual_seed(0)
    src, tgt = (torch.randint(4, 8000, (2, n), generator=g) for n in (5, 6))
    step, swapped = cpu_step_time.make_step(
        config, ("sdpa", dropout, linear), bf16, False, (src, tgt[:, :-1], tgt[:, 1:])
    )
    step()
    expected = use_onednn(linear, torch.device("cpu"), "bf16" if bf16 else "fp32")
    assert swapped == expected
    [model] = built
    kinds = {type(m) for m in model.modules() if isinstance(m, nn.Linear)}
    assert kinds == ({OneDNNLinear} if expected else {nn.Linear})
    dropouts = {type(m) for m in model.modules() if isinstance(m, nn.Dropout)}
    assert dropouts == ({CPUDropout} if dropout == "cpu" else {nn.Dropout})


@pytest.mark.parametrize(
    "flag, value", [("--linear-kernels", "torch,onednn"), ("--dropouts", "torch,fast")]
)
def test_an_unknown_kernel_is_refused(capsys, flag, value):
    with pytest.raises(SystemExit) as exit_info:
        cpu_step_time.main(["--config", str(CONFIG), flag, value])
    assert exit_info.value.code == 2
    assert flag in capsys.readouterr().err


def test_make_step_starts_from_a_checkpoint_that_still_stores_model_linear_kernel():
    model_config = dataclasses.replace(ModelConfig(), vocab_size=8000, **TINY)
    model = Transformer(model_config)
    optimizer = torch.optim.Adam(model.parameters(), fused=True)
    checkpoint = {
        "model_config": {**dataclasses.asdict(model_config), "linear_kernel": "auto"},
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
    }
    g = torch.Generator().manual_seed(0)
    src, tgt = (torch.randint(4, 8000, (2, n), generator=g) for n in (5, 6))
    batch = (src, tgt[:, :-1], tgt[:, 1:])
    kernels = ("sdpa", "torch", "auto")
    step, _ = cpu_step_time.make_step(Config(), kernels, False, False, batch, checkpoint)
    step()


def test_main_times_and_profiles_every_setting(capsys):
    tiny = CONFIG.with_name("tiny.yaml")
    argv = ["--config", str(tiny), "--threads", "1", "--steps", "1", "--flush", "on"]
    assert cpu_step_time.main([*argv, "--linear-kernels", "torch", "--profile", "3"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith(("fp32 ", "bf16 "))]
    # precision x attention x dropout, each timed once and profiled once
    assert sorted((r[0], r[2], r[3]) for r in rows if len(r) == 8) == sorted(
        (p, a, d) for p in ("fp32", "bf16") for a in ("sdpa", "math") for d in ("torch", "cpu")
    )
    assert out.count(": 3 steps") == 8 and "Self CPU" in out
