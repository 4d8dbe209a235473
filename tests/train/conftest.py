"""Fixtures of the tests/train/ folder."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def training_components():
    """`training_components(model, train=None)` -> (optimizer, schedule, scaler, batches) of a
    run training `model` (`train` defaults to `TrainConfig(warmup_steps=10)`), the batches over
    40 random pairs of 1-7 tokens."""
    import numpy as np
    import torch

    from transformer.data.batching import BatchIterator
    from transformer.data.dataset import ParallelDataset
    from transformer.train.config import TrainConfig
    from transformer.train.optim import build_lr_schedule, build_optimizer
    from transformer.train.precision import grad_scaler

    def components(model, train: TrainConfig | None = None):
        train = train or TrainConfig(warmup_steps=10)
        optimizer = build_optimizer(model, train)
        schedule = build_lr_schedule(optimizer, train, model.config.d_model)
        rng = np.random.default_rng(0)
        lengths = rng.integers(1, 8, 40)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        tokens = rng.integers(4, model.config.vocab_size, int(offsets[-1])).astype(np.uint16)
        data = ParallelDataset(tokens, offsets, tokens, offsets, np.arange(40))
        batches = BatchIterator(data, 64, seed=1)
        return optimizer, schedule, grad_scaler("fp32", torch.device("cpu")), batches

    return components
