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
        ("train.adam_betas=[0.9,2.0]", "train.adam_betas"),
        ("train.seed=-1", "train.seed"),
        ("train.seed=99999999999999999999999", "train.seed"),
        ("train.seed=9223372036854775808", "train.seed"),  # 2**63
        ("train.num_threads=100000", "train.num_threads"),
        ("train.lr_scale=.inf", "train.lr_scale"),
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


@pytest.mark.parametrize("world_size", [1, 2, 3, 8])
@pytest.mark.parametrize("tokens_per_update", [1, 1000, 4096, 4097, 25000])
def test_micro_batches_per_update_is_the_ceiling_of_tokens_over_the_world(
    world_size, tokens_per_update
):
    train = TrainConfig(max_tokens=4096, tokens_per_update=tokens_per_update)
    per_update = train.micro_batches_per_update(world_size)
    # The smallest count whose micro-batches on all processes hold tokens_per_update tokens.
    assert per_update * 4096 * world_size >= tokens_per_update
    assert per_update == 1 or (per_update - 1) * 4096 * world_size < tokens_per_update


def test_without_tokens_per_update_update_freq_is_used_as_given():
    assert TrainConfig(update_freq=3).micro_batches_per_update(8) == 3


def test_tokens_per_update_and_update_freq_are_exclusive():
    with pytest.raises(ValueError, match=r"tokens_per_update \(3000\) or train\.update_freq \(2\)"):
        TrainConfig(tokens_per_update=3000, update_freq=2)


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_a_decoded_best_metric_without_bleu_sentences_is_refused_at_load(metric):
    with pytest.raises(ValueError, match=f"train.best_metric is '{metric}' but train.valid_bleu"):
        TrainConfig(best_metric=metric, valid_bleu_sentences=0)
    assert TrainConfig(best_metric="loss", valid_bleu_sentences=0).valid_bleu_sentences == 0
