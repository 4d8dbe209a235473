"""Checkpoint averaging (section 6.1 of the paper); `transformer-average` is its command line.

"For the base models, we used a single model obtained by averaging the last 5 checkpoints,
which were written at 10-minute intervals. For the big models, we averaged the last 20."

Floating-point tensors are averaged (summed in float64, divided once, cast back); integer
tensors (buffers, counters) are copied from the newest checkpoint. Weights tied to each other
(the shared embedding and output projection share storage in the state dict) are averaged
once and stay tied in the output; an input whose copies of a tied matrix hold different
values is refused (`check_tied_weights`). The output is an ordinary checkpoint (config,
SentencePiece model, step of the newest input) without optimizer or data state, so
`load_checkpoint`, `transformer-translate` and `transformer-evaluate` accept it; it cannot be
resumed from.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from transformer.checkpoint import (
    check_tied_weights,
    read_checkpoint,
    stored_model_config,
    strip_wrapper_prefixes,
)
from transformer.config import RETIRED_KEYS
from transformer.model.config import ModelConfig
from transformer.model.transformer import Transformer
from transformer.train.run_directory import RunDirectory

# Entries of the newest input copied into the output (the training state is not).
KEPT_ENTRIES = ("format_version", "model_config", "config", "spm_model", "tgt_spm_model", "step")


def _storage_key(tensor: torch.Tensor) -> tuple:
    """Identifies tensors that are views of the same memory (tied weights)."""
    return (
        tensor.untyped_storage().data_ptr(),
        tensor.storage_offset(),
        tuple(tensor.shape),
        tensor.stride(),
    )


def _alias_groups(state_dict: dict) -> dict[str, str]:
    """Map every key to the first key sharing its storage (itself when not tied)."""
    first: dict[tuple, str] = {}
    return {key: first.setdefault(_storage_key(value), key) for key, value in state_dict.items()}


def average_checkpoints(paths: list[str | Path]) -> dict:
    """Average the model weights of `paths` (oldest first, the newest last).

    Args:
        paths: Checkpoint files of the same model and vocabulary.

    Returns:
        A checkpoint dict: the averaged "model" plus the newest input's config, SentencePiece
        model(s) and step, and "averaged_from" (the input paths).

    Raises:
        ValueError: fewer than one path; checkpoints whose weight keys, shapes or dtypes
            differ (naming the key and the file), or whose SentencePiece models or model
            configs differ (naming both files); a checkpoint whose copies of a tied matrix
            differ or whose model config is invalid (naming the file).
        FileNotFoundError: a missing input.
    """
    if not paths:
        raise ValueError("no checkpoints to average")
    sums: dict[str, torch.Tensor] = {}
    reference: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    newest: dict = {}
    for index, path in enumerate(paths):
        checkpoint = read_checkpoint(path)
        config = stored_model_config(checkpoint["model_config"], path)  # as loading checks it
        weights = strip_wrapper_prefixes(checkpoint["model"])
        if index == 0:
            with torch.device("meta"):  # no memory, no initialisation: it tells
                structure = Transformer(config)  # `check_tied_weights` the tied keys
            reference, aliases = weights, _alias_groups(weights)
            first_path, first = path, checkpoint
        else:
            _check_compatible(reference, weights, first_path, path)
            _check_same_run(first, checkpoint, first_path, path)
        check_tied_weights(weights, structure, path)
        for key, value in weights.items():
            if aliases[key] != key or not value.is_floating_point():
                continue
            if key in sums:
                sums[key] += value.double()
            else:
                sums[key] = value.double().clone()
        newest = {**checkpoint, "model": weights}
    averaged: dict[str, torch.Tensor] = {}
    for key in reference:  # the first checkpoint's order: a tied key follows its canonical one
        value, canonical = newest["model"][key], aliases[key]
        if canonical != key:
            averaged[key] = averaged[canonical]  # a tied weight: the same tensor again
        elif value.is_floating_point():
            averaged[key] = (sums[key] / len(paths)).to(value.dtype)
        else:
            averaged[key] = value.clone()
    result = {name: newest[name] for name in KEPT_ENTRIES if name in newest}
    result["model"] = averaged
    result["averaged_from"] = [str(p) for p in paths]
    return result


# Entries that must be equal in every input: what the weights mean.
SAME_RUN_ENTRIES = {
    "spm_model": "SentencePiece model (spm_model)",
    "tgt_spm_model": "target SentencePiece model (tgt_spm_model)",
    "model_config": "model config (model_config)",
}


# ModelConfig fields that choose how the same function is computed, or act only in training
# (the dropouts), not what the weights mean: a run may change them on resume, and its
# checkpoints still average (with the keys that older versions stored, `RETIRED_KEYS`).
KERNEL_FIELDS = ("attention_kernel", *RETIRED_KEYS["model"])
TRAINING_FIELDS = (
    "dropout",
    "attention_dropout",
    "activation_dropout",
    "src_word_dropout",
    "tgt_word_dropout",
)


def _architecture(model_config) -> dict | None:
    """A checkpoint's model config with defaults filled in, the kernel choices and the
    training-only fields left out."""
    if not isinstance(model_config, dict):
        return model_config
    defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    merged = {**defaults, **model_config}
    return {k: v for k, v in merged.items() if k not in (*KERNEL_FIELDS, *TRAINING_FIELDS)}


def _check_same_run(first: dict, checkpoint: dict, first_path, path) -> None:
    """Raise ValueError naming both files when their vocabularies or model configs differ.

    Model configs are compared without the kernel choices and the training-only fields
    (`KERNEL_FIELDS`, `TRAINING_FIELDS`), with missing keys (checkpoints written before a
    field existed) taken at their defaults; the message names the first field that differs.
    """
    for entry, what in SAME_RUN_ENTRIES.items():
        mine, theirs = checkpoint.get(entry), first.get(entry)
        if entry == "model_config":
            mine, theirs = _architecture(mine), _architecture(theirs)
            if isinstance(mine, dict) and isinstance(theirs, dict):
                fields = [
                    k for k in sorted(mine.keys() | theirs.keys()) if mine.get(k) != theirs.get(k)
                ]
                if fields:
                    field = fields[0]
                    what = f"{what}: {field} {mine.get(field)!r} against {theirs.get(field)!r}"
        if mine != theirs:
            raise ValueError(
                f"{path} and {first_path} have a different {what}; only checkpoints of the "
                "same model and vocabulary can be averaged"
            )


def _check_compatible(reference: dict, weights: dict, first: str | Path, path: str | Path):
    """Raise ValueError naming the first key whose presence, shape or dtype differs."""
    for key in sorted(reference.keys() | weights.keys()):
        if key not in weights:
            raise ValueError(f"{path} has no weight {key!r} (present in {first})")
        if key not in reference:
            raise ValueError(f"{path} has weight {key!r}, absent from {first}")
        a, b = reference[key], weights[key]
        if a.shape != b.shape or a.dtype != b.dtype:
            raise ValueError(
                f"weight {key!r} is {tuple(b.shape)} {b.dtype} in {path} but "
                f"{tuple(a.shape)} {a.dtype} in {first}"
            )


def distinct_files(paths: list[str | Path]) -> tuple[list[Path], list[tuple[Path, Path]]]:
    """`paths` without the names that are the same file as an earlier one (hard links, a name
    given twice, a symbolic link): averaging a file twice would weigh it twice.

    Args:
        paths: Existing files.

    Returns:
        (the first name of each file, in order; (dropped name, the kept name it repeats)).

    Raises:
        FileNotFoundError: a missing path.
    """
    kept: list[Path] = []
    seen: dict[tuple[int, int], Path] = {}
    repeats: list[tuple[Path, Path]] = []
    for path in map(Path, paths):
        status = path.stat()
        key = (status.st_dev, status.st_ino)
        if key in seen:
            repeats.append((path, seen[key]))
        else:
            seen[key] = path
            kept.append(path)
    return kept, repeats


def last_checkpoints(run_dir: str | Path, count: int) -> list[Path]:
    """The `count` (>= 1) newest numbered checkpoints (checkpoint_<step>.pt) of a run, oldest first.

    Raises:
        FileNotFoundError: when `run_dir` is not a directory.
        ValueError: when the directory holds fewer numbered checkpoints.
    """
    if not Path(run_dir).is_dir():
        raise FileNotFoundError(f"no such run directory: {run_dir}")
    found = RunDirectory(run_dir).numbered_checkpoints()
    if len(found) < count:
        raise ValueError(
            f"{run_dir} holds {len(found)} numbered checkpoints (checkpoint_<step>.pt), "
            f"fewer than --last {count}"
        )
    return found[-count:]
