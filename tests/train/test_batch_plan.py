"""Tests for transformer/train/batch_plan.py: `BatchPlan`'s totals and its one-line description."""

from __future__ import annotations

import pytest

from transformer.train.batch_plan import BatchPlan


def test_tokens_per_update_is_the_product_of_its_three_factors():
    plan = BatchPlan(max_tokens=2048, update_freq=3, world_size=2, target=None)
    assert plan.tokens_per_update == 2048 * 3 * 2
    assert plan.off_target == 0.0


def test_off_target_is_the_relative_distance_from_the_target():
    plan = BatchPlan(max_tokens=257, update_freq=1, world_size=128, target=25000)
    assert plan.off_target == pytest.approx(abs(257 * 128 - 25000) / 25000)


def test_describe_names_the_factors_and_warns_only_beyond_10_percent():
    near = BatchPlan(max_tokens=2048, update_freq=1, world_size=2, target=4096).describe()
    assert "up to 4,096 per side" in near and "max_tokens 2048 x update_freq 1 x 2" in near
    assert "target train.tokens_per_update 4,096" in near and "warning" not in near
    far = BatchPlan(max_tokens=300, update_freq=1, world_size=20, target=4096).describe()
    assert "warning: 46% off the target" in far
    assert "target" not in BatchPlan(1000, 3, 8, None).describe()
