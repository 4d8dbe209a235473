"""Tests for transformer/train/config.py: `TrainConfig`, the paper's recipe, and its checks."""

from __future__ import annotations

import pytest

from transformer.config import config_from_dict
from transformer.train.config import TrainConfig


def test_defaults_are_the_papers_recipe():
    train = TrainConfig()
    assert train.adam_betas == (0.9, 0.98) and train.adam_eps == 1e-9
    assert train.warmup_steps == 4000 and train.label_smoothing == 0.1
    assert train.clip_norm is None and train.lr_schedule == "noam"
    assert train.cooldown_fraction == 0  # the paper's runs end on the step^-0.5 decay


@pytest.mark.parametrize(
    "override, key",
    [
        ("train.precision=fp8", "train.precision"),
        ("train.best_metric=acc", "train.best_metric"),
        ("train.max_steps=0", "train.max_steps"),
        ("train.label_smoothing=1.0", "train.label_smoothing"),
        ("train.lr_schedule=cosine", "train.lr_schedule"),
        ("train.keep_last=-1", "train.keep_last"),
        ("train.adam_eps=-1", "train.adam_eps"),
        ("train.weight_decay=-0.1", "train.weight_decay"),
        ("train.cooldown_fraction=1.5", "train.cooldown_fraction"),
        ("train.cooldown_fraction=-0.1", "train.cooldown_fraction"),
        ("train.cooldown_fraction=.nan", "train.cooldown_fraction"),
        ("train.adam_betas=[0.9,2.0]", "train.adam_betas"),
        ("train.ema_decay=1.0", "train.ema_decay"),
        ("train.ema_decay=0", "train.ema_decay"),
        ("train.ema_decay=.nan", "train.ema_decay"),
        ("train.seed=-1", "train.seed"),
        ("train.seed=99999999999999999999999", "train.seed"),
        ("train.seed=9223372036854775808", "train.seed"),  # 2**63
        ("train.num_threads=100000", "train.num_threads"),
        ("train.lr_scale=.inf", "train.lr_scale"),
        ("train.output_dir=", "train.output_dir"),
        ('train.output_dir=" "', "train.output_dir"),
    ],
)
def test_out_of_range_train_values_name_the_key(override, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        config_from_dict({}, [override])


def test_seed_and_thread_bounds_are_one_line_errors_and_the_bounds_themselves_run():
    import torch

    with pytest.raises(
        ValueError, match=r"^train\.seed \(9223372036854775808\) must be in \[0, 2\*\*63\)$"
    ):
        TrainConfig(seed=2**63)
    with pytest.raises(ValueError, match=r"^train\.num_threads \(1025\) must be at most 1024$"):
        TrainConfig(num_threads=1025)
    largest = TrainConfig(seed=2**63 - 1, num_threads=1024)
    torch.manual_seed(largest.seed)  # the largest seed is one torch takes
    torch.Generator().manual_seed(largest.seed)


@pytest.mark.parametrize("cap", [3200, 4096, 8192, 25000])
def test_every_gpu_count_lands_within_10_percent_of_the_papers_25000_tokens(cap):
    train = TrainConfig(max_tokens=cap, tokens_per_update=25000)
    for world_size in range(1, 65):
        plan = train.batch_plan(world_size, longest=257)
        assert plan.max_tokens <= cap and plan.max_tokens >= 257
        assert plan.world_size == world_size and plan.target == 25000
        total = plan.max_tokens * plan.update_freq * world_size
        assert plan.tokens_per_update == total
        # No fewer tokens than the target, and within 10% of it.
        assert 25000 <= total <= 1.1 * 25000, (world_size, plan)
        # The fewest micro-batches that the cap allows.
        assert plan.update_freq == 1 or (plan.update_freq - 1) * cap * world_size < 25000
        assert "warning" not in plan.describe()


def test_the_issues_examples_give_exactly_25000_tokens():
    train = TrainConfig(max_tokens=8192, tokens_per_update=25000)
    assert (train.batch_plan(8).max_tokens, train.batch_plan(8).update_freq) == (3125, 1)
    assert (train.batch_plan(1).max_tokens, train.batch_plan(1).update_freq) == (6250, 4)
    line = train.batch_plan(8).describe()
    assert "up to 25,000 per side" in line and "max_tokens 3125 x update_freq 1 x 8" in line


def test_a_plan_that_cannot_reach_the_target_says_so():
    # 128 processes would take 196 tokens each, less than one pair of 257 tokens.
    plan = TrainConfig(max_tokens=8192, tokens_per_update=25000).batch_plan(128, longest=257)
    assert plan.max_tokens == 257 and plan.tokens_per_update == 257 * 128
    assert plan.off_target == pytest.approx(257 * 128 / 25000 - 1)
    assert "warning: 32% off the target" in plan.describe()


def test_without_tokens_per_update_max_tokens_and_update_freq_are_used_as_given():
    plan = TrainConfig(max_tokens=1000, update_freq=3).batch_plan(8, longest=300)
    assert (plan.max_tokens, plan.update_freq, plan.target) == (1000, 3, None)
    assert plan.off_target == 0.0 and "target" not in plan.describe()


def test_tokens_per_update_and_update_freq_are_exclusive():
    with pytest.raises(ValueError, match=r"tokens_per_update \(3000\) or train\.update_freq \(2\)"):
        TrainConfig(tokens_per_update=3000, update_freq=2)


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_a_decoded_best_metric_without_bleu_sentences_is_refused_at_load(metric):
    with pytest.raises(ValueError, match=f"train.best_metric is '{metric}' but train.valid_bleu"):
        TrainConfig(best_metric=metric, valid_bleu_sentences=0)
    assert TrainConfig(best_metric="loss", valid_bleu_sentences=0).valid_bleu_sentences == 0


def test_peak_lr_with_the_noam_schedule_is_an_error_not_ignored():
    # noam's height is lr_scale; a peak_lr there used to be dropped without a word.
    with pytest.raises(ValueError, match=r"train\.peak_lr \(0\.005\) is the peak of"):
        TrainConfig(lr_schedule="noam", peak_lr=0.005)


def test_lr_scale_with_the_inverse_sqrt_schedule_is_an_error_not_ignored():
    with pytest.raises(ValueError, match=r"train\.lr_scale \(0\.32\) scales lr_schedule noam"):
        TrainConfig(lr_schedule="inverse_sqrt", peak_lr=0.005, lr_scale=0.32)
    assert TrainConfig(lr_schedule="inverse_sqrt", peak_lr=0.005).peak_lr == 0.005


def test_a_stored_section_loses_only_the_knob_its_schedule_ignored():
    from transformer.train.config import without_unused_lr_knob

    noam = {"lr_schedule": "noam", "lr_scale": 0.32, "peak_lr": 0.005}
    assert without_unused_lr_knob(noam) == {"lr_schedule": "noam", "lr_scale": 0.32}
    assert without_unused_lr_knob({"peak_lr": 0.005}) == {}  # noam is the default
    inverse = {"lr_schedule": "inverse_sqrt", "lr_scale": 0.32, "peak_lr": 0.005}
    assert without_unused_lr_knob(inverse) == {"lr_schedule": "inverse_sqrt", "peak_lr": 0.005}
    assert noam["peak_lr"] == 0.005  # the caller's dict is left as it was
