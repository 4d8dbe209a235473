"""An exponential moving average of the weights, kept beside training (`train.ema_decay`).

Not in the paper, which averages the last checkpoints instead (section 6.1, `train/average.py`).
A moving average of the weights is the other usual way to the same end (Polyak and Juditsky,
1992; TensorFlow's `tf.train.ExponentialMovingAverage`, fairseq's `--ema-decay`). After every
applied update t = 1, 2, ...:

    average <- decay_t * average + (1 - decay_t) * weights
    decay_t = min(decay, (1 + t) / (10 + t))

The warm-up of decay_t (TensorFlow's `num_updates`) keeps the random initial weights from
lingering in the average. The average is kept in float32 on the training device; every training
checkpoint holds it (a resumed run goes on with it), and `checkpoint_ema.pt` holds it as
the weights of an ordinary checkpoint, which every command that reads checkpoints accepts.
"""

from __future__ import annotations

from pathlib import Path

import torch

from transformer.checkpoint import unwrap_model
from transformer.train.average import KEPT_ENTRIES


class ExponentialMovingAverage:
    """The moving average of a model's parameters (tied weights are one parameter, averaged once).

    Args:
        model: The model being trained (a DDP or compile wrapper is looked through); its
            parameters now are the average's starting point.
        decay: The largest decay per update, in (0, 1) (checked by `TrainConfig`); the
            average spans about 1 / (1 - decay) updates.

    Attributes:
        decay: As given.
        updates: Updates averaged so far (t).
        average: Parameter name -> float32 tensor, on the parameters' device.
    """

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        self._model = unwrap_model(model)
        self._parameters = dict(self._model.named_parameters())  # a tied weight appears once
        self.average = {
            name: parameter.detach().float().clone() for name, parameter in self._parameters.items()
        }

    @torch.no_grad()
    def restart(self) -> None:
        """Start again from the model's parameters now (t = 0): a run resumed from a checkpoint
        without an average."""
        self.updates = 0
        for name, parameter in self._parameters.items():
            self.average[name].copy_(parameter)

    def decay_at(self, update: int) -> float:
        """decay_t of update t (1 for the first): min(decay, (1 + t) / (10 + t))."""
        return min(self.decay, (1 + update) / (10 + update))

    @torch.no_grad()
    def update(self) -> None:
        """Fold the model's current parameters into the average (after an applied update)."""
        self.updates += 1
        weight = 1.0 - self.decay_at(self.updates)
        for name, parameter in self._parameters.items():
            self.average[name].lerp_(parameter.float(), weight)  # += weight * (new - average)

    def model_state_dict(self) -> dict[str, torch.Tensor]:
        """The model's `state_dict` with the averages in place of its parameters: buffers as
        they are, and the keys of a tied weight sharing one tensor, as in the model's own."""
        averages = {id(self._parameters[name]): value for name, value in self.average.items()}
        converted: dict[int, torch.Tensor] = {}
        result = {}
        for key, value in self._model.state_dict(keep_vars=True).items():
            if id(value) not in averages:  # a buffer
                result[key] = value.detach()
                continue
            if id(value) not in converted:  # the first key of a (possibly tied) parameter
                converted[id(value)] = averages[id(value)].to(value.dtype)
            result[key] = converted[id(value)]
        return result

    def checkpoint(self, training: dict) -> dict:
        """The weights-only checkpoint of the average (`checkpoint_ema.pt`).

        Args:
            training: The training checkpoint written at the same step (`training_checkpoint`).

        Returns:
            Its config, SentencePiece model(s) and step, with the average as "model",
            "ema_decay" and "ema_updates" (the updates averaged, fewer than the step when the
            average started on a resume): the format of an averaged checkpoint
            (`train/average.py`).
        """
        result = {name: training[name] for name in KEPT_ENTRIES if name in training}
        result["model"] = self.model_state_dict()
        result["ema_decay"], result["ema_updates"] = self.decay, self.updates
        return result

    def state_dict(self) -> dict:
        """{"decay", "updates", "average"}: what a training checkpoint stores."""
        return {"decay": self.decay, "updates": self.updates, "average": self.average}

    def load_state_dict(self, state: dict, path: str | Path) -> None:
        """Go on from a saved average (its update count too); the configured decay stays.

        Raises:
            ValueError: when the saved average is not one of this model's parameters (other
                names or shapes), naming `path`.
        """
        saved = state["average"]
        mismatched = sorted(set(saved) ^ set(self.average)) or [
            name for name in saved if tuple(saved[name].shape) != tuple(self.average[name].shape)
        ]
        if mismatched:
            raise ValueError(
                f"{path}: its moving average of the weights (ema) does not fit the model "
                f"({mismatched[0]}); use --no-resume or another train.output_dir"
            )
        for name, value in saved.items():
            self.average[name].copy_(value)
        self.updates = int(state["updates"])


def ema_changes(
    saved: dict | None, ema: ExponentialMovingAverage | None, ema_path: Path
) -> list[str]:
    """What a resume changes about the moving average, one line each (none when nothing does).

    Args:
        saved: The checkpoint's "ema" entry (None: the run kept no average).
        ema: This run's average (None: `train.ema_decay` is null).
        ema_path: The run's checkpoint_ema.pt.
    """
    if ema is None:
        if saved is None:
            return []
        return [
            f"train.ema_decay is null now: the moving average of the weights ends here, and "
            f"{ema_path} stays as it is (of an earlier step)"
        ]
    if saved is None:
        return ["it holds no moving average of the weights: it starts here (train.ema_decay)"]
    if saved["decay"] != ema.decay:
        return [
            f"train.ema_decay: {saved['decay']} in the checkpoint, {ema.decay} now "
            "(the configured value applies from here on)"
        ]
    return []
