"""Tests for transformer/train/training_checkpoint.py: a training checkpoint holds what the run
held, and loads back into fresh components exactly (end-to-end resumes: test_checkpoints.py)."""

from __future__ import annotations

import re

import pytest
import torch

from transformer.config import Config
from transformer.train.ema import ExponentialMovingAverage
from transformer.train.state import TrainState, capture_rng_state
from transformer.train.training_checkpoint import restore_training_checkpoint, training_checkpoint

TIED_COPIES_THAT_DIFFER = [
    (True, "tgt_embed.weight", "'src_embed.weight' and 'tgt_embed.weight'"),
    (True, "output_projection.weight", "'src_embed.weight' and 'output_projection.weight'"),
    (False, "output_projection.weight", "'tgt_embed.weight' and 'output_projection.weight'"),
]


def test_a_restored_run_holds_exactly_what_the_saved_run_held(
    make_model, tiny_tokenizer, training_components
):
    model = make_model(tiny_tokenizer.vocab_size, dropout=0.0).train()
    optimizer, schedule, scaler, batches = training_components(model)
    stream = iter(batches)
    for _ in range(3):  # three updates: Adam has moments, the schedule and batches moved on
        batch = next(stream)
        model(batch.src, batch.tgt_in).logsumexp(-1).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        schedule.step()
    state = TrainState(step=3, best_metric=2.5, best_step=2, elapsed_seconds=12.0)
    checkpoint = training_checkpoint(
        model=model,
        config=Config(model=model.config),
        tokenizer=tiny_tokenizer,
        optimizer=optimizer,
        schedule=schedule,
        scaler=scaler,
        batches=batches,
        rng=[capture_rng_state()],
        state=state,
        precision="fp32",
    )
    assert checkpoint["step"] == 3 and checkpoint["world_size"] == 1
    fresh = make_model(tiny_tokenizer.vocab_size, seed=1, dropout=0.0)
    components = training_components(fresh)
    restored = restore_training_checkpoint(
        checkpoint,
        "run/checkpoint_last.pt",
        model=fresh,
        optimizer=components[0],
        schedule=components[1],
        scaler=components[2],
        batches=components[3],
    )
    assert restored == state
    torch.testing.assert_close(fresh.state_dict(), model.state_dict(), rtol=0, atol=0)
    torch.testing.assert_close(components[0].state_dict(), optimizer.state_dict(), rtol=0, atol=0)
    assert components[1].state_dict() == schedule.state_dict()
    assert components[1].lr == schedule.lr
    assert components[3].state_dict() == batches.state_dict() == {"epoch": 1, "index": 3}
    assert torch.equal(next(iter(components[3])).src, next(stream).src)


@pytest.mark.parametrize("share, changed, keys", TIED_COPIES_THAT_DIFFER)
def test_resuming_refuses_tied_copies_that_differ(
    tmp_path, make_model, tiny_tokenizer, checkpoint_state, share, changed, keys
):
    model = make_model(tiny_tokenizer.vocab_size, share_embeddings=share)
    weights = {key: value.clone() for key, value in model.state_dict().items()}  # own storage
    weights[changed][0, 0] -= 0.5
    training = {"optimizer": {}, "lr_scheduler": {}, "data_position": {}, "train_state": {}}
    checkpoint = checkpoint_state(model, tiny_tokenizer, 7, model=weights, **training)
    path = tmp_path / "checkpoint_last.pt"
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: tied weights {keys} differ"):
        restore_training_checkpoint(  # the components after the weights are never reached
            checkpoint, path, model=model, optimizer=None, schedule=None, scaler=None, batches=None
        )


def test_the_moving_average_is_saved_and_restored_with_its_update_count(
    make_model, tiny_tokenizer, training_components
):
    model = make_model(tiny_tokenizer.vocab_size, dropout=0.0)
    ema = ExponentialMovingAverage(model, 0.9)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)
    ema.update()
    optimizer, schedule, scaler, batches = training_components(model)
    checkpoint = training_checkpoint(
        model=model, config=Config(model=model.config), tokenizer=tiny_tokenizer,
        optimizer=optimizer, schedule=schedule, scaler=scaler, batches=batches,
        rng=[capture_rng_state()], state=TrainState(step=1), precision="fp32", ema=ema,
    )  # fmt: skip
    fresh = make_model(tiny_tokenizer.vocab_size, seed=1, dropout=0.0)
    restored = ExponentialMovingAverage(fresh, 0.9)
    optimizer, schedule, scaler, batches = training_components(fresh)
    restore_training_checkpoint(
        checkpoint, "run/checkpoint_last.pt", model=fresh, optimizer=optimizer,
        schedule=schedule, scaler=scaler, batches=batches, ema=restored,
    )  # fmt: skip
    assert restored.updates == 1
    for name, value in ema.average.items():
        assert torch.equal(restored.average[name], value), name


@pytest.mark.parametrize(
    "key", ["optimizer", "lr_scheduler", "scaler", "data_position", "train_state", "ema"]
)
@pytest.mark.parametrize("entry", [{"unexpected": 1}, "text", [1, 2]])
def test_a_malformed_entry_is_one_error_naming_the_file_and_the_entry(
    tmp_path, make_model, tiny_tokenizer, training_components, key, entry
):
    model = make_model(tiny_tokenizer.vocab_size, dropout=0.0)
    ema = ExponentialMovingAverage(model, 0.9)
    optimizer, schedule, _, batches = training_components(model)
    scaler = torch.amp.GradScaler("cpu")  # enabled, so that its entry is loaded
    checkpoint = training_checkpoint(
        model=model, config=Config(model=model.config), tokenizer=tiny_tokenizer,
        optimizer=optimizer, schedule=schedule, scaler=scaler, batches=batches,
        rng=[capture_rng_state()], state=TrainState(step=1), precision="fp32", ema=ema,
    )  # fmt: skip
    checkpoint[key] = entry  # a hand-edited file, or one of another format
    path = tmp_path / "checkpoint_last.pt"
    fresh = make_model(tiny_tokenizer.vocab_size, seed=1, dropout=0.0)
    optimizer, schedule, _, batches = training_components(fresh)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: its '{key}' entry"):
        restore_training_checkpoint(
            checkpoint, path, model=fresh, optimizer=optimizer, schedule=schedule,
            scaler=torch.amp.GradScaler("cpu"), batches=batches,
            ema=ExponentialMovingAverage(fresh, 0.9),
        )  # fmt: skip
