"""The run directory of a training job and its checkpoint files.

    RUN_DIR/config.yaml            the resolved config (every key, after overrides)
    RUN_DIR/metrics.jsonl          training and validation metrics (see metrics_log.py)
    RUN_DIR/tensorboard/           the same metrics as TensorBoard events (train.tensorboard)
    RUN_DIR/checkpoint_<step>.pt   periodic checkpoints, the newest `keep_last` kept
    RUN_DIR/checkpoint_last.pt     the latest checkpoint (what a rerun resumes from)
    RUN_DIR/checkpoint_best.pt     the checkpoint with the best validation metric
    RUN_DIR/checkpoint_ema.pt      the moving average of the weights (train.ema_decay), weights only
    RUN_DIR/<spm files>            the SentencePiece model(s), written by data preparation

`checkpoint_last.pt` and `checkpoint_best.pt` are hard links to (or copies of) a numbered
checkpoint when one is written at the same step, so they cost no extra disk space. Every file
is written atomically (`transformer.atomic`): a crash leaves the old version or the new one.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from transformer.atomic import atomic_link, atomic_write_text
from transformer.checkpoint import save_checkpoint
from transformer.data.vocabulary import resolved_spec

NUMBERED = re.compile(r"^checkpoint_(\d+)\.pt$")


class RunDirectory:
    """Paths and checkpoint bookkeeping of one run directory.

    Args:
        path: The directory (created if missing).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def config_path(self) -> Path:
        return self.path / "config.yaml"

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def tensorboard_path(self) -> Path:
        return self.path / "tensorboard"

    @property
    def last_path(self) -> Path:
        return self.path / "checkpoint_last.pt"

    @property
    def best_path(self) -> Path:
        return self.path / "checkpoint_best.pt"

    @property
    def ema_path(self) -> Path:
        return self.path / "checkpoint_ema.pt"

    def step_path(self, step: int) -> Path:
        """The numbered checkpoint of `step`."""
        return self.path / f"checkpoint_{step}.pt"

    def create(self) -> None:
        """Make the directory (and its parents).

        Raises:
            ValueError: when it cannot be made (a parent is a file, no permission), naming
                train.output_dir.
        """
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ValueError(
                f"train.output_dir ({self.path}) cannot be created: {error.strerror or error}"
            ) from error

    @contextlib.contextmanager
    def removed_if_left_empty(self) -> Iterator[None]:
        """Create the directory for the block's work; when the block fails (an error, Ctrl-C)
        and the directory is new and holds no file, remove it (`remove_if_empty`): a run that
        failed before writing anything leaves nothing behind.

        Raises:
            ValueError: as `create`; whatever the block raises, unchanged.
        """
        new = not self.path.exists()
        self.create()
        try:
            yield
        except BaseException:
            if new:
                self.remove_if_empty()
            raise

    def remove_if_empty(self) -> bool:
        """Remove the directory when it holds no file (its empty subdirectories go with it):
        what a run that failed before writing anything leaves behind. Files are never removed.

        Returns:
            Whether the directory is gone.
        """
        if not self.path.is_dir():
            return False
        for folder, _, _ in sorted(os.walk(self.path), key=lambda entry: -len(entry[0])):
            try:
                os.rmdir(folder)  # only an empty one; deepest first
            except OSError:
                return False
        return True

    def write_config(self, config_dict: dict) -> None:
        """Write the resolved config as YAML (re-loadable with `load_config`), atomically.

        Local corpus prefixes, `data.cache_dir` and `train.output_dir` are written as absolute
        paths (resolved as the job resolved them), so that `transformer-train --config
        RUN_DIR/config.yaml` resumes the run from any working directory.
        """
        data, train = dict(config_dict["data"]), dict(config_dict["train"])
        for key in ("train", "valid", "test"):
            if data.get(key):
                data[key] = resolved_spec(data[key])
        if data.get("cache_dir"):
            data["cache_dir"] = str(Path(data["cache_dir"]).expanduser().resolve())
        train["output_dir"] = str(self.path.resolve())
        config_dict = {**config_dict, "data": data, "train": train}
        text = yaml.safe_dump(config_dict, sort_keys=False, default_flow_style=None)
        atomic_write_text(self.config_path, text)

    def numbered_checkpoints(self) -> list[Path]:
        """Numbered checkpoints, oldest (smallest step) first."""
        if not self.path.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.path.iterdir() if (m := NUMBERED.match(p.name))]
        return [p for _, p in sorted(found)]

    def save(self, state: dict, step: int, keep_last: int, numbered: bool, best: bool) -> None:
        """Write the checkpoint of `step` as checkpoint_last.pt (and numbered / best).

        Args:
            state: The checkpoint dict.
            step: Its update count.
            keep_last: How many numbered checkpoints to keep (older ones are deleted).
            numbered: Also keep it as checkpoint_<step>.pt (when `keep_last` > 0).
            best: Also make it checkpoint_best.pt.
        """
        if numbered and keep_last > 0:
            first = self.step_path(step)
            save_checkpoint(state, first)
            atomic_link(first, self.last_path)
        else:
            first = self.last_path
            save_checkpoint(state, first)
        if best:
            atomic_link(first, self.best_path)
        if keep_last > 0:
            for old in self.numbered_checkpoints()[:-keep_last]:
                old.unlink()

    def set_aside_previous_run(self) -> Path | None:
        """Move an earlier run's checkpoints, metrics.jsonl and tensorboard/ to previous-<time>/.

        A fresh start must not leave them beside the new ones: `keep_last` pruning and
        `transformer-average --last N` would mix the two runs. Nothing is deleted.

        Returns:
            The folder they went to, or None when there was nothing to move.
        """
        old = sorted(self.path.glob("checkpoint_*.pt"))
        old += [p for p in (self.metrics_path, self.tensorboard_path) if p.exists()]
        if not old:
            return None
        aside = self.path / time.strftime("previous-%Y%m%d-%H%M%S", time.gmtime())
        aside.mkdir(exist_ok=True)
        for path in old:
            path.rename(aside / path.name)
        return aside

    def save_best(self, state: dict) -> None:
        """Write `state` as checkpoint_best.pt only."""
        save_checkpoint(state, self.best_path)
