"""Resuming after a change to how the batches are cut (section 5.1: batches by length).

A resumed run goes on at the saved position of its batch stream (`BatchIterator.state_dict`:
epoch and batch index). That position means something only for the batches it was saved with:
another `train.max_tokens`, `train.tokens_per_update`, `train.update_freq`, `train.seed`,
`data.train`, `data.max_len`, `data.max_len_ratio`, `data.bpe_dropout` or number of processes
cuts an epoch (or deals it out to the ranks) differently, and the saved index then names other
pairs or lies past the epoch's end; so do BPE-dropout samples drawn again into a new cache.
fairseq lets a resumed job change `--max-tokens` (after running out of memory, say, with a
larger `--update-freq`); so does this project, from the start of the next epoch, which sees
every pair once, and one line says what changed.
"""

from __future__ import annotations

from transformer.config import Config, config_to_dict

BATCHING_KEYS = (
    ("train", "max_tokens"),
    ("train", "tokens_per_update"),
    ("train", "update_freq"),
    ("train", "seed"),
    ("data", "train"),
    ("data", "max_len"),
    ("data", "max_len_ratio"),
    ("data", "bpe_dropout"),
)


def batching_changes(
    checkpoint: dict, config: Config, world_size: int, position: dict | None = None
) -> list[str]:
    """What cuts the batches differently now than when `checkpoint` was written.

    Args:
        checkpoint: A training checkpoint (`training_checkpoint`): its `config`,
            `world_size` and `data_position` entries.
        config: The job's config now.
        world_size: The job's number of processes now.
        position: The job's batch position now (`BatchIterator.state_dict`): its
            "segmentation", the identity of BPE-dropout's samples (data/bpe_dropout.py), is
            compared with the saved one; a new cache entry holds other samples.

    Returns:
        One "key: value there, value now" phrase per change (empty when none); a key the
        checkpoint does not record counts as unchanged.
    """
    saved, now = checkpoint.get("config") or {}, config_to_dict(config)
    changes = []
    for section, key in BATCHING_KEYS:
        if key in (saved.get(section) or {}) and saved[section][key] != now[section][key]:
            changes.append(
                f"{section}.{key}: {saved[section][key]!r} there, {now[section][key]!r} now"
            )
    saved_world = checkpoint.get("world_size")
    if saved_world is not None and saved_world != world_size:
        changes.append(f"processes: {saved_world} there, {world_size} now")
    drawn = (checkpoint.get("data_position") or {}).get("segmentation")
    drawing = (position or {}).get("segmentation")
    if drawn is not None and drawing is not None and drawn != drawing and not changes:
        changes.append(
            f"BPE-dropout samples: {drawn} there, {drawing} now (drawn again: a new cache entry)"
        )
    return changes


def resume_position(
    checkpoint: dict, config: Config, world_size: int, now: dict | None = None
) -> tuple[dict, str | None]:
    """The batch position to resume from, and the line to log when it moved.

    Args:
        checkpoint: A training checkpoint, with its `data_position` {"epoch": E, "index": I}.
        config: The job's config now.
        world_size: The job's number of processes now.
        now: The job's batch position now (see `batching_changes`).

    Returns:
        The saved position when the batches are cut as they were (line None); else the start
        of the next epoch, {"epoch": E + 1, "index": 0} (E when I is 0), and a line naming
        the changes.
    """
    position = checkpoint["data_position"]
    changes = batching_changes(checkpoint, config, world_size, now)
    if not changes:
        return position, None
    epoch = int(position["epoch"]) + (1 if int(position["index"]) > 0 else 0)
    line = (
        f"the batches are cut differently than when it was written ({'; '.join(changes)}): "
        f"training goes on from the start of epoch {epoch}, not bit for bit as the saved run"
    )
    return {"epoch": epoch, "index": 0}, line
