"""What training does with an update whose loss is NaN or Inf: skip it, or stop clearly.

With `train.skip_nonfinite` the update is skipped and counted (up to `MAX_CONSECUTIVE_SKIPS`
in a row); otherwise, and after that many, training stops with `NonFiniteLossError`, whose
message names the step, the checkpoint kept and what to change.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from transformer.train.config import TrainConfig
from transformer.train.state import TrainState
from transformer.train.update import UpdateResult

# With skip_nonfinite, this many non-finite updates in a row still stop training.
MAX_CONSECUTIVE_SKIPS = 100


class NonFiniteLossError(FloatingPointError):
    """The loss of an update was NaN or Inf (training stopped; the last checkpoint is kept)."""


def handle_nonfinite(
    result: UpdateResult,
    consecutive: int,
    state: TrainState,
    train: TrainConfig,
    last_checkpoint: Path,
    log: Callable[[str], None],
) -> None:
    """Skip and count the update (`skip_nonfinite`), or stop with a clear message.

    Args:
        result: The update with the non-finite loss.
        consecutive: Non-finite updates in a row, this one included.
        state: The run's counters (`skipped_updates` is increased).
        train: The `train:` section.
        last_checkpoint: The run's `checkpoint_last.pt` (named in the message).
        log: Receives the warning of a skipped update.

    Raises:
        NonFiniteLossError: unless the update is skipped.
    """
    step = state.step + 1
    value = result.loss_sum / max(result.tokens, 1)
    if train.skip_nonfinite and consecutive < MAX_CONSECUTIVE_SKIPS:
        state.skipped_updates += 1
        log(
            f"warning: non-finite loss ({value}) at step {step}: update skipped "
            f"({state.skipped_updates} skipped so far)"
        )
        return
    if last_checkpoint.is_file():
        kept = f"the last good checkpoint {last_checkpoint} is kept"
    else:
        kept = "no checkpoint had been written yet"
    if train.skip_nonfinite:
        why = f"{consecutive} non-finite updates in a row"
    else:
        why = "set train.skip_nonfinite=true to skip such updates instead"
    raise NonFiniteLossError(
        f"non-finite loss ({value}) at step {step}; training stopped and {kept} ({why}). "
        "Lower the learning rate (train.lr_scale / train.peak_lr), raise "
        "train.warmup_steps, or use train.clip_norm / train.precision=fp32."
    )
