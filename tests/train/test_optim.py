"""Tests for transformer/train/optim.py: Adam and the learning-rate schedule of section 5.3."""

from __future__ import annotations

import math

import pytest
import torch

from transformer.train.config import TrainConfig
from transformer.train.optim import (
    Cooldown,
    LRSchedule,
    build_lr_schedule,
    build_optimizer,
    changed_settings,
    inverse_sqrt_rate,
    load_optimizer_state,
    noam_rate,
)


def test_paper_rate_at_first_update_and_at_the_peak():
    # Equation 3 at step 1 is the warm-up branch, d^-0.5 * warmup^-1.5; at step = warmup both
    # branches meet: d^-0.5 * warmup^-0.5.
    assert noam_rate(1, 512, 4000) == pytest.approx(512**-0.5 * 4000**-1.5, rel=1e-12)
    assert noam_rate(4000, 512, 4000) == pytest.approx((512 * 4000) ** -0.5, rel=1e-12)
    assert max(noam_rate(s, 512, 4000) for s in range(1, 20_000, 7)) <= noam_rate(4000, 512, 4000)


@pytest.mark.parametrize("step", [1, 10, 3999, 4000, 4001, 10_000, 100_000])
def test_paper_rate_closed_form(step):
    expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
    assert noam_rate(step, 512, 4000) == pytest.approx(expected, rel=1e-12)
    assert noam_rate(step, 512, 4000, scale=2.0) == pytest.approx(2 * expected, rel=1e-12)


def test_paper_rate_rises_then_decays():
    rates = [noam_rate(s, 512, 4000) for s in (1000, 2000, 4000, 8000, 16000)]
    assert rates[0] < rates[1] < rates[2] > rates[3] > rates[4]
    assert rates[2] / rates[4] == pytest.approx(2.0)


def test_inverse_sqrt_rate():
    assert inverse_sqrt_rate(1, 5e-4, 4000) == pytest.approx(5e-4 / 4000)
    assert inverse_sqrt_rate(2000, 5e-4, 4000) == pytest.approx(2.5e-4)
    assert inverse_sqrt_rate(4000, 5e-4, 4000) == pytest.approx(5e-4)
    assert inverse_sqrt_rate(16000, 5e-4, 4000) == pytest.approx(2.5e-4)


def test_rate_rejects_step_zero():
    with pytest.raises(ValueError, match="step"):
        noam_rate(0, 512, 4000)


def test_optimizer_is_adam_with_the_paper_settings():
    optimizer = build_optimizer(torch.nn.Linear(3, 2), TrainConfig())
    assert isinstance(optimizer, torch.optim.Adam)
    group = optimizer.param_groups[0]
    assert tuple(group["betas"]) == (0.9, 0.98)
    assert group["eps"] == 1e-9
    assert group["weight_decay"] == 0.0
    assert group["fused"] is True  # CPU parameters: PyTorch's fused Adam


def _step_together(pairs, steps: int = 5) -> None:
    """Run `steps` updates of each (layer, optimizer) pair on the same inputs and noam rates."""
    for step in range(1, steps + 1):
        x = torch.randn(4, 6)
        for layer, opt in pairs:
            opt.param_groups[0]["lr"] = noam_rate(step, 512, 4)
            opt.zero_grad()
            layer(x).pow(2).sum().backward()
            opt.step()


def test_fused_adam_follows_the_reference_adam_for_several_steps():
    torch.manual_seed(0)
    ours, ref = torch.nn.Linear(6, 5), torch.nn.Linear(6, 5)
    ref.load_state_dict(ours.state_dict())
    initial = ours.weight.detach().clone()
    train = TrainConfig(weight_decay=0.01)
    optimizer = build_optimizer(ours, train)
    reference = torch.optim.Adam(
        ref.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01, foreach=False
    )
    _step_together([(ours, optimizer), (ref, reference)])
    for a, b in zip(ours.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    assert (ours.weight - initial).abs().min() > 0  # every weight moved


def test_decoupled_weight_decay_follows_torch_adamw():
    torch.manual_seed(0)
    ours, ref, l2 = (torch.nn.Linear(6, 5) for _ in range(3))
    ref.load_state_dict(ours.state_dict())
    l2.load_state_dict(ours.state_dict())
    train = TrainConfig(weight_decay=0.1, decoupled_weight_decay=True)
    optimizer = build_optimizer(ours, train)
    reference = torch.optim.AdamW(
        ref.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.1, foreach=False
    )
    coupled = build_optimizer(l2, TrainConfig(weight_decay=0.1))
    _step_together([(ours, optimizer), (ref, reference), (l2, coupled)])
    for a, b in zip(ours.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    # The L2 form is a different update: the flag is not ignored.
    assert not torch.allclose(ours.weight, l2.weight, rtol=1e-4, atol=1e-6)


def test_a_loaded_state_keeps_the_configured_settings_and_the_saved_moments():
    """Three updates of plain Adam, then a resume configured with AdamW's weight decay and
    other betas and eps: the next update is AdamW's closed form (Loshchilov and Hutter, 2019,
    algorithm 2) with the saved moments and step count and the new settings. torch's
    `load_state_dict` alone would bring back weight decay 0 and the old betas and eps."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(6, 5)
    first = build_optimizer(layer, TrainConfig())
    _step_together([(layer, first)], steps=3)
    saved = first.state_dict()
    moments = {key: value.clone() for key, value in saved["state"][0].items()}  # the weight's
    train = TrainConfig(
        weight_decay=0.1, decoupled_weight_decay=True, adam_betas=(0.8, 0.95), adam_eps=1e-6
    )
    optimizer = build_optimizer(layer, train)
    load_optimizer_state(optimizer, saved)
    group = optimizer.param_groups[0]
    assert (tuple(group["betas"]), group["eps"]) == ((0.8, 0.95), 1e-6)
    assert (group["weight_decay"], group["decoupled_weight_decay"]) == (0.1, True)
    before, lr = layer.weight.detach().clone(), 1e-2
    group["lr"] = lr
    optimizer.zero_grad()
    layer(torch.randn(4, 6)).pow(2).sum().backward()
    grad = layer.weight.grad.clone()
    optimizer.step()
    m = 0.8 * moments["exp_avg"] + 0.2 * grad
    v = 0.95 * moments["exp_avg_sq"] + 0.05 * grad**2
    step = int(moments["step"]) + 1
    assert step == 4
    m_hat, v_hat = m / (1 - 0.8**step), v / (1 - 0.95**step)
    expected = before * (1 - lr * 0.1) - lr * m_hat / (v_hat.sqrt() + 1e-6)
    torch.testing.assert_close(layer.weight.detach(), expected, rtol=1e-5, atol=1e-7)


def test_changed_settings_names_the_config_keys_whose_values_differ():
    layer = torch.nn.Linear(3, 2)
    saved = build_optimizer(layer, TrainConfig()).state_dict()
    assert changed_settings(build_optimizer(layer, TrainConfig(lr_scale=2.0)), saved) == []
    train = TrainConfig(weight_decay=0.1, decoupled_weight_decay=True, adam_betas=(0.9, 0.999))
    now = build_optimizer(layer, train)
    assert changed_settings(now, saved) == [
        "train.adam_betas: [0.9, 0.98] in the checkpoint, [0.9, 0.999] now",
        "train.weight_decay: 0.0 in the checkpoint, 0.1 now",
        "train.decoupled_weight_decay: False in the checkpoint, True now",
    ]
    # A state saved before torch's Adam had the flag: it was L2 weight decay (False).
    del saved["param_groups"][0]["decoupled_weight_decay"]
    assert changed_settings(now, saved)[-1] == (
        "train.decoupled_weight_decay: False in the checkpoint, True now"
    )
    same = build_optimizer(layer, TrainConfig())
    assert changed_settings(same, saved) == []


def test_first_update_uses_the_rate_of_step_one():
    """Adam's first step moves each weight by lr * g / (|g| + eps) ~ lr: the rate of step 1."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 4)
    train = TrainConfig(warmup_steps=4000)
    optimizer = build_optimizer(layer, train)
    schedule = build_lr_schedule(optimizer, train, d_model=512)
    before = layer.weight.detach().clone()
    layer(torch.randn(8, 4)).pow(2).sum().backward()
    optimizer.step()
    schedule.step()
    moved = (layer.weight.detach() - before).abs()
    assert torch.allclose(moved, torch.full_like(moved, noam_rate(1, 512, 4000)), rtol=1e-4)
    assert optimizer.param_groups[0]["lr"] == noam_rate(2, 512, 4000)


def test_schedule_counts_updates_and_round_trips():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    schedule = LRSchedule(optimizer, lambda step: 1.0 / step)
    assert optimizer.param_groups[0]["lr"] == 1.0
    for _ in range(3):
        schedule.step()
    assert schedule.lr == optimizer.param_groups[0]["lr"] == 0.25
    other = LRSchedule(optimizer, lambda step: 1.0 / step)
    other.load_state_dict(schedule.state_dict())
    assert other.num_updates == 3 and other.lr == 0.25


def test_inverse_sqrt_schedule_needs_peak_lr():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    with pytest.raises(ValueError, match="peak_lr"):
        TrainConfig(lr_schedule="inverse_sqrt")
    schedule = build_lr_schedule(
        optimizer, TrainConfig(lr_schedule="inverse_sqrt", peak_lr=1e-3, warmup_steps=10), 512
    )
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-4)
    assert math.isclose(schedule.rate(40), 5e-4)


def test_cooldown_factor_is_linear_over_the_last_part_of_a_step_budget():
    cooldown = Cooldown(0.2, max_steps=100, max_seconds=None)
    assert [cooldown.factor(n, None) for n in (0, 50, 79)] == [1.0, 1.0, 1.0]
    assert cooldown.factor(80, None) == pytest.approx(1.0)  # where it starts
    # 1 - spent over the fraction: (1 - 0.9) / 0.2 and (1 - 0.95) / 0.2.
    assert cooldown.factor(90, None) == pytest.approx(0.5)
    assert cooldown.factor(95, None) == pytest.approx(0.25)
    assert cooldown.factor(100, None) == 0.0 and cooldown.factor(120, None) == 0.0
    # The whole budget: falls from the first update on.
    assert Cooldown(1.0, 100, None).factor(30, None) == pytest.approx(0.7)


def test_cooldown_follows_whichever_budget_is_nearer_to_being_spent():
    cooldown = Cooldown(0.5, max_steps=1000, max_seconds=600.0)
    assert cooldown.factor(100, 450.0) == pytest.approx((1 - 450 / 600) / 0.5)  # time
    assert cooldown.factor(900, 60.0) == pytest.approx((1 - 900 / 1000) / 0.5)  # steps
    assert cooldown.factor(900, None) == pytest.approx(0.2)  # no clock given: steps only
    assert cooldown.factor(10, 600.0) == 0.0


def test_schedule_with_a_cooldown_is_the_rate_times_the_factor_after_each_update():
    """noam x linear cooldown against the closed form, step by step: the rate of update n is
    set after update n - 1, from the budget spent by then."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    train = TrainConfig(warmup_steps=4, max_steps=10, cooldown_fraction=0.4, lr_scale=2.0)
    schedule = build_lr_schedule(optimizer, train, d_model=64)
    for n in range(1, 11):
        factor = min(1.0, (1 - (n - 1) / 10) / 0.4)
        expected = 2.0 * 64**-0.5 * min(n**-0.5, n * 4**-1.5) * factor
        assert optimizer.param_groups[0]["lr"] == pytest.approx(expected, rel=1e-12), n
        schedule.step()
    assert schedule.lr == 0.0  # the budget is spent


def test_a_time_budget_cooldown_reads_the_clock_it_is_given_and_round_trips():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    train = TrainConfig(
        lr_schedule="inverse_sqrt", peak_lr=1.0, warmup_steps=1, max_minutes=10.0,
        cooldown_fraction=0.5,
    )  # fmt: skip
    schedule = build_lr_schedule(optimizer, train, d_model=64)
    schedule.step(elapsed_seconds=450.0)  # 3/4 of 600 s spent: factor (1 - 0.75) / 0.5
    assert optimizer.param_groups[0]["lr"] == pytest.approx(2**-0.5 * 0.5)
    other = build_lr_schedule(optimizer, train, d_model=64)
    other.load_state_dict(schedule.state_dict())
    assert other.lr == schedule.lr and other.factor == 0.5
    other.load_state_dict({"num_updates": 1})  # a checkpoint from before the cooldown existed
    assert other.factor == 1.0 and other.lr == pytest.approx(2**-0.5)


def test_a_schedule_without_cooldown_ignores_a_stored_factor():
    """Resumed with `cooldown_fraction` 0 after a cooldown began: the plain rate again."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    schedule = LRSchedule(optimizer, lambda step: 1.0 / step)
    schedule.load_state_dict({"num_updates": 3, "cooldown_factor": 0.25})
    assert schedule.factor == 1.0 and optimizer.param_groups[0]["lr"] == 0.25
