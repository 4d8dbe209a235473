"""TensorBoard event files with the scalars of metrics.jsonl (`train.tensorboard: true`).

`TensorBoardLog` mirrors the run's `MetricsLog`: every record written to metrics.jsonl is also
written here, at the same place (`MetricsLog.write`), so the two never disagree. Each number of
a record but its step becomes a scalar tagged `<type>/<field>` (`train/loss`, `train/lr`,
`valid/bleu`, ...) at the record's step; booleans (a validation's `best`) and strings are not
scalars. Only rank 0 writes, into `RUN_DIR/tensorboard/`:

    tensorboard --logdir RUN_DIR/tensorboard

A resumed run appends a new event file whose writer hides the events of the steps after its
checkpoint (`SummaryWriter`'s `purge_step`), as metrics.jsonl drops their lines
(`MetricsLog.truncate_after`), so TensorBoard shows each step once, with the values of the run
that kept it. Those older events stay in the older files (nothing is deleted); TensorBoard's
`EventAccumulator` hides them (`tests/train/test_tensorboard_log.py`). A fresh start moves an
earlier `tensorboard/` aside with the earlier run's checkpoints (`train/checkpoints.py`).

Events are flushed at every checkpoint and when training ends (also after Ctrl-C / SIGTERM);
in between, TensorBoard's writer flushes every two minutes. Writing needs the tensorboard
package (`pip install tensorboard`, or the `tensorboard` extra), checked before any work.
"""

from __future__ import annotations

from pathlib import Path

TENSORBOARD_INSTALL_HINT = (
    "train.tensorboard: true needs the tensorboard package: pip install tensorboard "
    "(or pip install -e '.[tensorboard]' in a clone of this repository), or set "
    "train.tensorboard=false"
)


def summary_writer_class():
    """torch's `SummaryWriter` (`torch.utils.tensorboard`), which needs the tensorboard package.

    Returns:
        The class.

    Raises:
        ImportError: without tensorboard, saying how to install it (`TENSORBOARD_INSTALL_HINT`).
    """
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as error:
        raise ImportError(TENSORBOARD_INSTALL_HINT) from error
    return SummaryWriter


def record_scalars(record: dict) -> list[tuple[str, float]]:
    """The TensorBoard scalars of one metrics.jsonl record, sorted by tag.

    Args:
        record: A `{"type": ..., "step": ..., ...}` record of `MetricsLog`.

    Returns:
        `(f"{type}/{field}", value)` for every int or float field but `step` (booleans and
        strings are left out).
    """
    kind = record.get("type", "metrics")
    return [
        (f"{kind}/{field}", float(value))
        for field, value in sorted(record.items())
        if field != "step" and isinstance(value, int | float) and not isinstance(value, bool)
    ]


class TensorBoardLog:
    """A `MetricsLog` mirror that writes TensorBoard event files (see the module docstring).

    Args:
        directory: Where the event files go (`RunDirectory.tensorboard_path`; created with
            the first record).
        purge_step: The first step this run writes (the resumed step + 1): TensorBoard hides
            the events of earlier runs from this step on. None hides nothing.

    Raises:
        ImportError: without tensorboard (`TENSORBOARD_INSTALL_HINT`).
    """

    def __init__(self, directory: str | Path, purge_step: int | None = None) -> None:
        self.summary_writer = summary_writer_class()  # checked now, before any work
        self.directory = Path(directory)
        self.purge_step = purge_step
        self.writer = None  # opened by the first record: a rerun of a finished run adds no file

    def write(self, record: dict) -> None:
        """Add the scalars of `record` (`record_scalars`) at its step."""
        if self.writer is None:
            self.writer = self.summary_writer(
                log_dir=str(self.directory), purge_step=self.purge_step
            )
        for tag, value in record_scalars(record):
            self.writer.add_scalar(tag, value, global_step=record["step"])

    def flush(self) -> None:
        """Write the pending events to disk."""
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        if self.writer is not None:
            self.writer.close()
