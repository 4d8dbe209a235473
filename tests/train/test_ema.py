"""The moving average of the weights (`train.ema_decay`) against its closed form.

After updates 1..n with decay_t = min(decay, (1 + t) / (10 + t)), the recurrence
average_t = decay_t * average_{t-1} + (1 - decay_t) * w_t unrolls to a weighted sum:
w_0 * prod_{t=1..n} decay_t + sum_i w_i * (1 - decay_i) * prod_{t=i+1..n} decay_t.
The tests compute that sum in float64 from the weights seen at each update.
"""

from __future__ import annotations

import math
import re

import pytest
import torch

from transformer.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint
from transformer.train.ema import ExponentialMovingAverage


def closed_form(snapshots: list[dict], decay: float) -> dict[str, torch.Tensor]:
    """The weighted sum above; snapshots[0] is w_0 (the start), snapshots[t] the weights after
    update t."""
    decays = [min(decay, (1 + t) / (10 + t)) for t in range(1, len(snapshots))]
    coefficients = []
    for i in range(len(snapshots)):
        later = math.prod(decays[i:])  # prod_{t=i+1..n} decay_t
        coefficients.append(later if i == 0 else (1 - decays[i - 1]) * later)
    assert math.isclose(sum(coefficients), 1.0)
    return {
        name: sum(c * s[name].double() for c, s in zip(coefficients, snapshots, strict=True))
        for name in snapshots[0]
    }


def test_the_average_is_the_closed_form_weighted_sum():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    ema = ExponentialMovingAverage(
        model, decay=0.8
    )  # decay_t = 2/11, 3/12, ... then 0.8 from t = 30
    snapshots = [{k: v.detach().clone() for k, v in model.named_parameters()}]
    for _ in range(40):
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(torch.randn_like(parameter))
        ema.update()
        snapshots.append({k: v.detach().clone() for k, v in model.named_parameters()})
    assert ema.updates == 40
    expected = closed_form(snapshots, 0.8)
    for name, value in ema.average.items():
        torch.testing.assert_close(value.double(), expected[name], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(ema.average["1.weight"], model[1].weight)  # an average, not the last


def test_the_ema_checkpoint_keeps_tied_weights_tied_and_loads_as_a_model(
    tmp_path, make_model, tiny_tokenizer, checkpoint_state
):
    model = make_model(tiny_tokenizer.vocab_size, share_embeddings=True)
    ema = ExponentialMovingAverage(model, decay=0.5)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(2.0)
    ema.update()  # decay_1 = 2/11: the average is (2/11) w + (9/11) 2w = (20/11) w
    training = checkpoint_state(model, tiny_tokenizer, 9, optimizer={"not": "copied"})
    path = tmp_path / "checkpoint_ema.pt"
    save_checkpoint(ema.checkpoint(training), path)

    saved = read_checkpoint(path)
    assert saved["step"] == 9 and saved["ema_decay"] == 0.5 and "optimizer" not in saved
    weights = saved["model"]
    shared = weights["src_embed.weight"].data_ptr()
    tied = [key for key, value in weights.items() if value.data_ptr() == shared]
    assert len(tied) >= 2  # the shared embedding and output projection: one stored tensor
    loaded, tokenizer, _ = load_checkpoint(path)
    assert tokenizer.src_model_bytes == tiny_tokenizer.src_model_bytes
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(dict(loaded.named_parameters())[name], parameter * (10 / 11))
    for name, buffer in model.named_buffers():
        torch.testing.assert_close(dict(loaded.named_buffers())[name], buffer, rtol=0, atol=0)


def test_a_saved_average_of_another_model_is_refused_naming_the_file(make_model, tiny_tokenizer):
    small = ExponentialMovingAverage(make_model(tiny_tokenizer.vocab_size), decay=0.9)
    wider = ExponentialMovingAverage(make_model(tiny_tokenizer.vocab_size, d_ff=48), decay=0.9)
    with pytest.raises(ValueError, match=r"^run/checkpoint_last\.pt: its moving average .* \(.*\)"):
        small.load_state_dict(wider.state_dict(), "run/checkpoint_last.pt")


def test_training_writes_the_average_of_the_weights_of_every_update_and_resumes_it(
    tmp_path, tiny_run, monkeypatch
):
    """3 updates without an average, then resumed to 5 with `train.ema_decay`: the log says the
    average starts there, and checkpoint_ema.pt holds the closed form over the weights at
    step 3 and after updates 4 and 5 (recorded as training went)."""
    from transformer.train.trainer import Trainer

    snapshots = []
    start, update = ExponentialMovingAverage.restart, ExponentialMovingAverage.update

    def record(method):
        def recorded(self):
            method(self)
            snapshots.append({k: v.detach().clone() for k, v in self._parameters.items()})

        return recorded

    monkeypatch.setattr(ExponentialMovingAverage, "restart", record(start))
    monkeypatch.setattr(ExponentialMovingAverage, "update", record(update))
    run_dir = tmp_path / "run"
    common = [*tiny_run.fast, f"train.output_dir={run_dir}", "train.save_interval_steps=0"]
    Trainer(tiny_run.load([*common, "train.max_steps=3"])).train()
    assert not (run_dir / "checkpoint_ema.pt").exists() and not snapshots
    at_step_3 = read_checkpoint(run_dir / "checkpoint_last.pt")["model"]
    lines = []
    overrides = [*common, "train.max_steps=5", "train.ema_decay=0.5"]
    Trainer(tiny_run.load(overrides), log=lines.append).train()

    assert len(snapshots) == 3  # the restart at step 3, updates 4 and 5
    last = read_checkpoint(run_dir / "checkpoint_last.pt")
    for name, value in snapshots[0].items():  # the restart took the resumed weights
        assert torch.equal(value, at_step_3[name]), name
    assert any(re.search(r"holds no moving average .* starts here", line) for line in lines)
    saved = read_checkpoint(run_dir / "checkpoint_ema.pt")
    assert saved["step"] == 5 and last["ema"]["updates"] == 2
    expected = closed_form(snapshots, 0.5)
    for name, value in expected.items():
        torch.testing.assert_close(saved["model"][name].double(), value, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(
            last["ema"]["average"][name].double(), value, rtol=1e-5, atol=1e-6
        )
        assert not torch.equal(saved["model"][name], last["model"][name]), name  # not the last
