"""The typed config: the paper's defaults, and out-of-range values rejected by key."""

from __future__ import annotations

import pytest

from transformer.config import TrainConfig
from transformer.config_file import config_from_dict


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
    ],
)
def test_out_of_range_train_values_name_the_key(override, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        config_from_dict({}, [override])
