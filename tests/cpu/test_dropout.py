"""transformer/cpu/dropout.py: the same function as `nn.Dropout` (checked against its definition
and against `nn.Dropout` itself where no random numbers are drawn), applied by the trainer to
CPU training outside torch.compile only."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from transformer.cpu.dropout import CPUDropout, swap_dropout_layers

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p", [0.1, 0.3, 0.7])
def test_keeps_each_element_with_probability_one_minus_p_and_scales_it(dtype, p):
    torch.manual_seed(0)
    x = torch.rand(400, 50, 64, dtype=dtype) + 1.0  # no zeros: a zero output means dropped
    out = CPUDropout(p).train()(x)
    kept = out != 0
    n = x.numel()
    mean, sd = n * (1 - p), math.sqrt(n * p * (1 - p))
    assert abs(kept.sum().item() - mean) < 5 * sd  # Binomial(n, 1 - p)
    expected = x[kept] * torch.tensor(1 / (1 - p), dtype=dtype)  # inverted dropout
    torch.testing.assert_close(out[kept], expected, rtol=0, atol=0)
    assert out.dtype == dtype and out.shape == x.shape


def test_gradient_is_the_mask_scaled_by_one_over_keep():
    torch.manual_seed(1)
    x = (torch.rand(64, 33) + 1.0).requires_grad_()
    out = CPUDropout(0.3).train()(x)
    weights = torch.randn_like(out)
    (out * weights).sum().backward()
    kept = (out != 0).float()
    torch.testing.assert_close(x.grad, weights * kept / 0.7)


def test_same_seed_same_masks_and_different_masks_each_call():
    layer = CPUDropout(0.5).train()
    x = torch.ones(1000)
    torch.manual_seed(3)
    first, second = layer(x), layer(x)
    torch.manual_seed(3)
    assert torch.equal(layer(x), first)
    assert not torch.equal(first, second)


@pytest.mark.parametrize(
    "layer, x",
    [
        (CPUDropout(0.3).eval(), torch.randn(8, 5)),  # eval: the identity
        (CPUDropout(0.0).train(), torch.randn(8, 5)),  # p = 0: the identity
        (CPUDropout(1.0).train(), torch.randn(8, 5)),  # p = 1: all zeros
        (CPUDropout(0.3, inplace=True).train(), torch.randn(8, 5)),  # nn.Dropout's own
    ],
)
def test_other_cases_are_nn_dropouts(layer, x):
    reference = nn.Dropout(layer.p, layer.inplace).train(layer.training)
    torch.manual_seed(5)
    got = layer(x.clone())
    torch.manual_seed(5)
    assert torch.equal(got, reference(x.clone()))


def test_swap_changes_only_plain_dropouts_and_keeps_the_model(make_model):
    tiny_model = make_model(60)

    class Custom(nn.Dropout):
        pass

    tiny_model.extra = Custom(0.2)
    plain = [m for m in tiny_model.modules() if type(m) is nn.Dropout]
    keys = list(tiny_model.state_dict())
    src = torch.randint(4, 50, (2, 7))
    tgt = torch.randint(4, 50, (2, 5))
    before = tiny_model.eval()(src, tgt)
    swapped = swap_dropout_layers(tiny_model)
    assert plain and swapped == plain
    assert all(type(m) is CPUDropout for m in plain) and type(tiny_model.extra) is Custom
    assert list(tiny_model.state_dict()) == keys
    torch.testing.assert_close(tiny_model(src, tgt), before, rtol=0, atol=0)


@pytest.mark.slow
def test_trainer_swaps_for_cpu_training_but_not_under_compile(tmp_path, shared_data, monkeypatch):
    from transformer.config import load_config
    from transformer.train.trainer import Trainer

    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    overrides = [f"train.output_dir={tmp_path}", "train.max_steps=1"]
    eager = Trainer(load_config(TINY, overrides))
    dropouts = [m for m in eager.model.modules() if isinstance(m, nn.Dropout)]
    assert dropouts and all(type(m) is CPUDropout for m in dropouts)
    compiled = Trainer(load_config(TINY, [*overrides, "train.compile=true"]))
    assert all(type(m) is nn.Dropout for m in compiled.model.modules() if isinstance(m, nn.Dropout))
