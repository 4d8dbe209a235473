"""A training job's data: prepared once by rank 0, awaited by the others without a collective.

Preparing WMT14 (reading 4.5M pairs, training SentencePiece, encoding) takes longer than the
10 minutes after which NCCL's watchdog aborts a collective, so the other processes of a
torchrun job must not wait for it in a barrier. They wait on the shared run directory instead:
every file of the prepared data is written atomically (`transformer.atomic`), so a process
that finds the SentencePiece model and the cached token ids of its config finds them whole.
`prepare_run_data` runs before the process group starts (`transformer.cli.train`), and rank 0
prepares while the others poll. A job on several machines needs the run directory on a
filesystem they share, as it does for resuming.

`transformer-prepare` does the same work ahead of time (what `scripts/reproduce_wmt14.sh`
runs before torchrun); then every rank finds the data at once.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from transformer.atomic import remove_stale_temporaries
from transformer.config import Config
from transformer.data.prepare import DataNotPrepared, PreparedData, prepare_data
from transformer.train.distributed import DistributedContext
from transformer.train.run_directory import RunDirectory

# Seconds between two looks at the run directory, and before the first "waiting" message.
POLL_SECONDS = 1.0
LOOK_ANYWAY_SECONDS = 30.0
FIRST_NOTICE_SECONDS = 60.0


def prepare_run_data(
    config: Config,
    context: DistributedContext,
    log: Callable[[str], None] | None = print,
    poll_seconds: float = POLL_SECONDS,
    replace_model: bool = False,
) -> PreparedData:
    """Rank 0 prepares the data in `train.output_dir`; every other rank waits for it, then loads it.

    Args:
        config: The whole config (`data:` and `train.output_dir`).
        context: This process's place in the job (no process group needed).
        log: Rank 0's one-line progress messages (None silences them).
        poll_seconds: Seconds between two looks at the run directory (other ranks).
        replace_model: Rank 0 may train a new SentencePiece model beside old checkpoints (a
            fresh start, `--no-resume`; see `prepare_data`).

    Returns:
        The `PreparedData` (tokenizer, training and validation pairs).

    Raises:
        FileNotFoundError, ValueError: as `prepare_data` (missing or unreadable corpora, a
            model that does not fit the config, a split that is empty after filtering).
    """
    run_dir = RunDirectory(config.train.output_dir)
    if context.is_main:
        for path in remove_stale_temporaries(run_dir.path):  # left by a SIGKILL'ed save
            if log is not None:
                log(f"removed {path.name}, left by an interrupted write")
        with run_dir.removed_if_left_empty():  # missing or empty corpora, Ctrl-C
            return prepare_data(
                config.data, run_dir.path, train=True, log=log, replace_model=replace_model
            )
    started = last_look = time.monotonic()
    notice, seen = FIRST_NOTICE_SECONDS, None
    while True:
        # A look fingerprints the corpus files (seconds for WMT14): look only when rank 0
        # has written something since the last look (a new file changes its directory's
        # mtime; read before the look, so no write is missed), and every 30 s regardless
        # (filesystems with coarse timestamps).
        written = _written(config, run_dir)
        if written != seen or time.monotonic() - last_look >= LOOK_ANYWAY_SECONDS:
            seen, last_look = written, time.monotonic()
            try:
                return prepare_data(config.data, run_dir.path, train=True, log=None, build=False)
            except DataNotPrepared:
                pass
        waited = time.monotonic() - started
        if waited >= notice:  # after 1 minute, then every 10 minutes
            print(
                f"rank {context.rank}: waited {waited / 60:.0f} min for rank 0 to prepare "
                f"the data in {run_dir.path} (a job on several machines needs it on a "
                "filesystem they share; transformer-prepare prepares it ahead of time)",
                file=sys.stderr,
                flush=True,
            )
            notice += 600.0
        time.sleep(poll_seconds)


def _written(config: Config, run_dir: RunDirectory) -> tuple:
    """When the run directory and the token cache last changed (cheap: two `stat` calls)."""
    cache = config.data.cache_directory(run_dir.path)
    return tuple(
        path.stat().st_mtime_ns if path.exists() else None for path in (run_dir.path, cache)
    )
