"""Tests for transformer/train/checkpoints.py: writing a training checkpoint and resuming from it.

References: every component's own `state_dict()` (a restored component must hold what the saved
one held), and an uninterrupted run (a run killed with SIGKILL and resumed must end bit for bit
where it ends).
"""

from __future__ import annotations

import re
import threading
import time
from functools import partial

import pytest
import torch

from transformer.checkpoint import read_checkpoint, save_checkpoint
from transformer.config import Config
from transformer.train import checkpoints as checkpoints_module
from transformer.train.checkpoints import TrainingCheckpoints
from transformer.train.config import TrainConfig
from transformer.train.distributed import DistributedContext
from transformer.train.ema import ExponentialMovingAverage
from transformer.train.prefetch import Prefetcher
from transformer.train.run_directory import RunDirectory
from transformer.train.state import TrainState, capture_rng_state
from transformer.train.training_checkpoint import training_checkpoint


def _saved_run(tmp_path, model, tokenizer, components, step: int, ema=None):
    """Write the training checkpoint of `model` and its `training_components` (and moving
    average `ema`) at `step` as `tmp_path`/checkpoint_last.pt; returns (config, run directory)."""
    optimizer, schedule, scaler, batches = components
    config = Config(model=model.config)
    checkpoint = training_checkpoint(
        model=model,
        config=config,
        tokenizer=tokenizer,
        optimizer=optimizer,
        schedule=schedule,
        scaler=scaler,
        batches=batches,
        rng=[capture_rng_state()],
        state=TrainState(step=step),
        precision="fp32",
        ema=ema,
    )
    run_dir = RunDirectory(tmp_path)
    save_checkpoint(checkpoint, run_dir.last_path)
    return config, run_dir


def test_resuming_on_a_gpu_reads_the_checkpoint_to_the_cpu(
    tmp_path, make_model, tiny_tokenizer, monkeypatch, training_components
):
    """A checkpoint read straight to the GPU would put the saved RNG states there, and
    `restore_rng_state` needs them on the CPU. Simulated with a context on cuda:0 and the
    components on the CPU: reading to cuda:0 fails on a machine without CUDA, as `.numpy()` of
    a CUDA tensor fails on one with it; reading to the CPU and loading works on both."""
    model = make_model(tiny_tokenizer.vocab_size, dropout=0.0)
    config, run_dir = _saved_run(tmp_path, model, tiny_tokenizer, training_components(model), 4)
    places = []

    def spy(path, map_location="cpu"):
        places.append(map_location)
        return read_checkpoint(path, map_location=map_location)

    monkeypatch.setattr(checkpoints_module, "read_checkpoint", spy)
    fresh = make_model(tiny_tokenizer.vocab_size, seed=1, dropout=0.0)
    context = DistributedContext(device=torch.device("cuda", 0))
    training = TrainingCheckpoints(
        run_dir, context, config, tiny_tokenizer, "fp32", fresh, *training_components(fresh)
    )
    assert training.resume(log=print) == TrainState(step=4)
    assert places == ["cpu"]
    torch.testing.assert_close(fresh.state_dict(), model.state_dict(), rtol=0, atol=0)


def test_a_run_resumed_with_other_adam_settings_uses_them_and_says_so(
    tmp_path, make_model, tiny_tokenizer, training_components
):
    """Saved with weight decay 0, resumed with `train.weight_decay: 0.1` in AdamW's form: the
    optimizer holds the configured settings (not the saved ones, as `load_state_dict` alone
    would leave it) and the saved moments, and the log names each changed key once."""
    model = make_model(tiny_tokenizer.vocab_size, dropout=0.0)
    components = training_components(model)
    optimizer, batches = components[0], components[3]
    batch = next(iter(batches))
    model(batch.src, batch.tgt_in).logsumexp(-1).mean().backward()
    optimizer.step()
    config, run_dir = _saved_run(tmp_path, model, tiny_tokenizer, components, 1)
    train = TrainConfig(warmup_steps=10, weight_decay=0.1, decoupled_weight_decay=True)
    fresh = make_model(tiny_tokenizer.vocab_size, seed=1, dropout=0.0)
    components = training_components(fresh, train)
    training = TrainingCheckpoints(
        run_dir, DistributedContext(), config, tiny_tokenizer, "fp32", fresh, *components
    )
    lines = []
    assert training.resume(log=lines.append) == TrainState(step=1)
    group = components[0].param_groups[0]
    assert (group["weight_decay"], group["decoupled_weight_decay"]) == (0.1, True)
    assert lines == [
        f"{run_dir.last_path}: train.weight_decay: 0.0 in the checkpoint, 0.1 now "
        "(the configured value applies from here on)",
        f"{run_dir.last_path}: train.decoupled_weight_decay: False in the checkpoint, True now "
        "(the configured value applies from here on)",
    ]
    saved, resumed = optimizer.state_dict()["state"], components[0].state_dict()["state"]
    torch.testing.assert_close(resumed, saved, rtol=0, atol=0)


def test_optimizer_state_from_the_cpu_follows_the_parameters_device():
    """What resuming relies on: `Optimizer.load_state_dict` moves Adam's moments to each
    parameter's device (here `meta`, standing in for a GPU)."""
    parameter = torch.nn.Parameter(torch.randn(3))
    adam = torch.optim.Adam([parameter])
    parameter.grad = torch.ones(3)
    adam.step()
    on_device = torch.nn.Parameter(torch.empty(3, device="meta"))
    resumed = torch.optim.Adam([on_device])
    resumed.load_state_dict(adam.state_dict())
    state = resumed.state[on_device]
    assert state["exp_avg"].device == state["exp_avg_sq"].device == torch.device("meta")


KILL_AT_STEP_5 = """
import os, signal, sys
from transformer.train.run_directory import RunDirectory
from transformer.cli.train import main

save = RunDirectory.save

def save_then_die(self, state, step, *args, **kwargs):
    save(self, state, step, *args, **kwargs)
    if step == 5:
        os.kill(os.getpid(), signal.SIGKILL)

RunDirectory.save = save_then_die
sys.exit(main(sys.argv[1:]))
"""


# Two runs cover every setting whose state a resume must restore (four runs took 64 s of the
# default test run on 2 cores): the deterministic kernels, the cooldown and the moving
# average together; BPE-dropout with the defaults, the ordinary run.
@pytest.mark.parametrize(
    "deterministic, cooldown, bpe_dropout, ema",
    [("true", "0.6", "0", "0.9"), ("false", "0", "0.1", "null")],
)
def test_kill_9_and_resume_is_bit_identical(
    tmp_path, tiny_run, deterministic, cooldown, bpe_dropout, ema
):
    common = ["--config", str(tiny_run.config_path), *tiny_run.fast]
    common += ["train.max_steps=10", "train.save_interval_steps=5"]
    common += [f"train.deterministic={deterministic}"]  # every op has a deterministic kernel
    common += [f"train.cooldown_fraction={cooldown}"]  # 0.6: lower from update 6, after the resume
    # BPE-dropout 0.1: the resumed process draws epoch 1 again from the samples both runs share
    # (a fresh cache would hold other SentencePiece samples: data/bpe_dropout.py).
    common += [f"data.bpe_dropout={bpe_dropout}", f"data.cache_dir={tmp_path / 'cache'}"]
    common += [f"train.ema_decay={ema}"]  # 0.9: the moving average goes on from the checkpoint
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    tiny_run.python(["-m", "transformer.train", *common, f"train.output_dir={straight}"])
    killed = tiny_run.python(
        ["-c", KILL_AT_STEP_5, *common, f"train.output_dir={resumed}"], check=False
    )
    assert killed.returncode == -9, killed.stderr
    assert read_checkpoint(resumed / "checkpoint_last.pt")["step"] == 5
    tiny_run.python(["-m", "transformer.train", *common, f"train.output_dir={resumed}"])

    a = read_checkpoint(straight / "checkpoint_last.pt")
    b = read_checkpoint(resumed / "checkpoint_last.pt")
    assert a["step"] == b["step"] == 10
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    for key, value in a["optimizer"]["state"][0].items():
        assert torch.equal(value, b["optimizer"]["state"][0][key]), key
    steps = lambda records: [(r["step"], r["loss"], r["lr"]) for r in records]  # noqa: E731
    assert steps(tiny_run.records(straight)) == steps(tiny_run.records(resumed))
    assert [r["step"] for r in tiny_run.records(resumed)] == list(range(1, 11))
    if ema != "null":
        a, b = (read_checkpoint(run / "checkpoint_ema.pt") for run in (straight, resumed))
        assert a["step"] == b["step"] == 10
        for key, value in a["model"].items():
            assert torch.equal(value, b["model"][key]), key


def test_resuming_a_run_that_read_batches_ahead_is_bit_identical(tmp_path, tiny_run, monkeypatch):
    """With the batch reading thread (a GPU's default, forced here on the CPU), a checkpoint
    holds the position of the updates taken, not of the batches read ahead: a run stopped at
    step 3 and resumed ends where an uninterrupted one ends."""
    from transformer.train import trainer as trainer_module
    from transformer.train.trainer import Trainer

    monkeypatch.setattr(trainer_module, "Prefetcher", partial(Prefetcher, background=True))
    save, saved = TrainingCheckpoints.save, []

    def save_once_read_ahead(self, state, *args):
        # Wait until the thread has read 3 updates (6 batches) ahead: 2 queued, 1 waiting.
        taken, read = self.batches.state_dict, self.batches.batches.state_dict
        deadline = time.monotonic() + 10
        while read()["index"] != taken()["index"] + 6:
            assert time.monotonic() < deadline, "the thread did not read ahead"
            time.sleep(0.01)
        saved.append((state.step, taken(), read()))
        save(self, state, *args)

    monkeypatch.setattr(TrainingCheckpoints, "save", save_once_read_ahead)
    common = [*tiny_run.fast, "train.update_freq=2", "train.save_interval_steps=3"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    Trainer(tiny_run.load([*common, f"train.output_dir={straight}", "train.max_steps=6"])).train()
    Trainer(tiny_run.load([*common, f"train.output_dir={resumed}", "train.max_steps=3"])).train()
    assert saved[-1] == (3, {"epoch": 1, "index": 6}, {"epoch": 1, "index": 12})
    assert read_checkpoint(resumed / "checkpoint_last.pt")["data_position"] == saved[-1][1]
    Trainer(tiny_run.load([*common, f"train.output_dir={resumed}", "train.max_steps=6"])).train()

    a = read_checkpoint(straight / "checkpoint_last.pt")
    b = read_checkpoint(resumed / "checkpoint_last.pt")
    assert a["step"] == b["step"] == 6 and a["data_position"] == b["data_position"]
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    steps = lambda records: [(r["step"], r["loss"], r["lr"]) for r in records]  # noqa: E731
    assert steps(tiny_run.records(straight)) == steps(tiny_run.records(resumed))
    assert not [t for t in threading.enumerate() if t.name == "prefetch-batches"]  # closed


@pytest.mark.parametrize(
    "saved, configured, note",
    [
        (0.9, 0.9, None),
        (0.9, 0.5, r"train\.ema_decay: 0\.9 in the checkpoint, 0\.5 now \(the configured value"),
        (0.9, None, r"train\.ema_decay is null now: .* ends here, and .*checkpoint_ema\.pt stays"),
        (None, 0.5, r"it holds no moving average of the weights: it starts here"),
        (None, None, None),
    ],
)
def test_a_resume_names_each_change_of_the_moving_average(
    tmp_path, make_model, tiny_tokenizer, saved, configured, note, training_components
):
    """Saved with or without an average (`train.ema_decay`), resumed with the same, another or
    no decay: one line per change, naming the checkpoint; the average goes on from the saved
    one (its update count too) or starts from the resumed weights."""
    model = make_model(tiny_tokenizer.vocab_size, dropout=0.0)
    saved_ema = None if saved is None else ExponentialMovingAverage(model, saved)
    if saved_ema is not None:
        saved_ema.updates = 3
    components = training_components(model)
    config, run_dir = _saved_run(tmp_path, model, tiny_tokenizer, components, 3, saved_ema)
    fresh = make_model(tiny_tokenizer.vocab_size, seed=1, dropout=0.0)
    ema = None if configured is None else ExponentialMovingAverage(fresh, configured)
    training = TrainingCheckpoints(
        run_dir, DistributedContext(), config, tiny_tokenizer, "fp32", fresh,
        *training_components(fresh), ema=ema,
    )  # fmt: skip
    lines = []
    training.resume(log=lines.append)
    notes = [line for line in lines if "ema" in line or "moving average" in line]
    if note is None:
        assert notes == []
    else:
        assert len(notes) == 1 and notes[0].startswith(f"{run_dir.last_path}: ")
        assert re.search(note, notes[0]), notes[0]
    if ema is not None:
        assert ema.updates == (0 if saved is None else 3) and ema.decay == configured
        for name, value in fresh.named_parameters():  # the resumed weights, either way
            torch.testing.assert_close(ema.average[name], value, rtol=0, atol=0)


def test_checkpoint_ema_is_written_with_checkpoint_last_only(
    tmp_path, make_model, tiny_tokenizer, training_components
):
    """A save of checkpoint_best.pt alone (a best validation between two saves) leaves
    checkpoint_ema.pt as it is, so that it is never of a later step than checkpoint_last.pt."""
    model = make_model(tiny_tokenizer.vocab_size, dropout=0.0)
    run_dir = RunDirectory(tmp_path)
    training = TrainingCheckpoints(
        run_dir, DistributedContext(), Config(model=model.config), tiny_tokenizer, "fp32", model,
        *training_components(model), ema=ExponentialMovingAverage(model, 0.9),
    )  # fmt: skip
    training.save(TrainState(step=2), numbered=False, best=False)
    training.save(TrainState(step=3), numbered=False, best=True)
    assert read_checkpoint(run_dir.best_path)["step"] == 3
    assert read_checkpoint(run_dir.last_path)["step"] == 2
    assert read_checkpoint(run_dir.ema_path)["step"] == 2
    training.save(TrainState(step=4), numbered=True, best=False)
    assert read_checkpoint(run_dir.ema_path)["step"] == read_checkpoint(run_dir.last_path)["step"]
