"""benchmarks/cpu_step_time.py: its linear-kernel axis swaps the layers as the trainer would."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from torch import nn

from benchmarks import cpu_step_time
from transformer.config import Config
from transformer.cpu.onednn import OneDNNLinear, use_onednn
from transformer.model.config import ModelConfig
from transformer.model.transformer import Transformer

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "multi30k.yaml"
TINY = dict(d_model=16, d_ff=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1)


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("linear", ["torch", "auto"])
def test_make_step_swaps_the_layers_where_train_linear_kernel_would(monkeypatch, linear, bf16):
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
        config, ("sdpa", linear), bf16, False, (src, tgt[:, :-1], tgt[:, 1:])
    )
    step()
    expected = use_onednn(linear, torch.device("cpu"), "bf16" if bf16 else "fp32")
    assert swapped == expected
    [model] = built
    kinds = {type(m) for m in model.modules() if isinstance(m, nn.Linear)}
    assert kinds == ({OneDNNLinear} if expected else {nn.Linear})


def test_an_unknown_linear_kernel_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cpu_step_time.main(["--config", str(CONFIG), "--linear-kernels", "torch,onednn"])
    assert exit_info.value.code == 2
    assert "--linear-kernels" in capsys.readouterr().err


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
    step, _ = cpu_step_time.make_step(
        Config(), ("sdpa", "auto"), False, False, (src, tgt[:, :-1], tgt[:, 1:]), checkpoint
    )
    step()
