"""The typed config: the paper's defaults, and out-of-range values rejected by key."""

from __future__ import annotations

import pytest

from transformer.config import config_from_dict
from transformer.model.config import ModelConfig
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
        ("train.lr_scale=.inf", "train.lr_scale"),
        ("model.layer_norm_eps=-1", "layer_norm_eps"),
        ("model.layer_norm_eps=.nan", "layer_norm_eps"),
    ],
)
def test_out_of_range_train_values_name_the_key(override, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        config_from_dict({}, [override])


@pytest.mark.parametrize(
    "key, value",
    [
        ("beam_size", 0),
        ("max_tokens", 0),
        ("length_penalty", -0.1),
        ("length_penalty", float("nan")),
        ("length_penalty", float("inf")),
        ("length_penalty_style", "linear"),
        ("max_len_a", -1.0),
        ("max_len_b", -1),
    ],
)
def test_out_of_range_decode_values_name_the_key(key, value):
    with pytest.raises(ValueError, match=rf"decode\.{key}"):
        config_from_dict({"decode": {key: value}})


def test_data_vocab_size_below_the_special_tokens_is_named():
    with pytest.raises(ValueError, match=r"data\.vocab_size \(3\)"):
        config_from_dict({"data": {"vocab_size": 3}})


@pytest.mark.parametrize("kwargs", [dict(d_model=16.0), dict(n_heads=True), dict(d_ff="2048")])
def test_model_sizes_must_be_integers(kwargs):
    (name,) = kwargs
    with pytest.raises(ValueError, match=f"{name} .* must be an integer"):
        ModelConfig(**kwargs)
