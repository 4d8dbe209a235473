"""Self-contained checkpoints: writing them atomically, reading them safely, rebuilding the model.

A checkpoint is a dict of tensors and plain Python values only, so that
`torch.load(path, weights_only=True)` reads it and a file from a stranger cannot run code:

    {"format_version": 1,
     "model": state_dict of the un-wrapped model (no `module.` / `_orig_mod.` prefixes),
     "model_config": dict of ModelConfig fields, "config": the full config as a dict,
     "spm_model": bytes, "tgt_spm_model": bytes | None,
     "step": int, "optimizer": ..., "lr_scheduler": ..., "scaler": ..., "data_position": ...,
     "rng": ..., ...}

The model carries its own config (nanoGPT style), so `load_checkpoint` rebuilds the exact model
from the file alone.
"""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
import zipfile
from pathlib import Path

import torch

from transformer.atomic import atomic_write
from transformer.config import RETIRED_KEYS, Config, config_from_dict
from transformer.data.tokenizer import Tokenizer
from transformer.device import resolve_device
from transformer.model.config import ModelConfig
from transformer.model.transformer import Transformer

FORMAT_VERSION = 1
WRAPPER_PREFIXES = ("module.", "_orig_mod.")


def save_checkpoint(state: dict, path: str | Path) -> None:
    """Write `state` to `path` atomically (`transformer.atomic.atomic_write`).

    A process killed at any moment leaves either the old file or the new one under `path`,
    never a truncated one.

    Args:
        state: The checkpoint dict (tensors and plain values only).
        path: Final file name; its directory must exist.
    """
    atomic_write(path, lambda file: torch.save(state, file))


def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Load a checkpoint dict safely (`weights_only=True`) and check its format.

    Args:
        path: Checkpoint file.
        map_location: Where tensors go.

    Returns:
        The checkpoint dict.

    Raises:
        FileNotFoundError: if `path` does not exist.
        ValueError: if `path` is not a file name or not a regular file; if the file is not a
            checkpoint (unreadable, holds code or objects other than tensors and plain values,
            lacks `format_version`/`model`/`model_config`), has another `format_version`, or
            holds an entry of the wrong type (`check_entry_types`); the message names the path
            and the problem.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"checkpoint path must be a file name, not {type(path).__name__}")
    path = Path(path)
    if not path.is_file():
        if path.exists():  # a directory, a device (/dev/null), a pipe
            raise ValueError(f"{path}: not a checkpoint file (it is not a regular file)")
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if path.stat().st_size == 0:
        raise ValueError(f"{path}: not a readable checkpoint: the file is empty (0 bytes)")
    damaged = _damaged_member(path)
    if damaged is not None:  # torch.load does not check the CRC-32 of what it reads
        raise ValueError(
            f"{path}: damaged checkpoint: {damaged} fails its CRC-32 check (the file was "
            "changed after it was written; use another checkpoint)"
        )
    try:
        with warnings.catch_warnings():  # a plain pickle: torch warns before it refuses
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # a text or foreign file can raise almost anything
        raise ValueError(
            f"{path}: not a readable checkpoint (corrupt, truncated, not a PyTorch file, or "
            f"holding objects other than tensors and plain values): {_load_problem(error)}"
        ) from error
    if not isinstance(state, dict) or "format_version" not in state:
        raise ValueError(f"{path}: not a checkpoint of this project (no 'format_version' key)")
    version = state["format_version"]
    if type(version) is not int or version != FORMAT_VERSION:  # not a tensor, bool or float
        shown = repr(version) if isinstance(version, (int, float, str)) else type(version).__name__
        raise ValueError(
            f"{path}: checkpoint format_version {shown} is not supported "
            f"(this code reads format_version {FORMAT_VERSION})"
        )
    for key in ("model", "model_config"):
        if key not in state:
            raise ValueError(f"{path}: checkpoint has no {key!r} entry")
    check_entry_types(state, path)
    return state


def check_entry_types(state: dict, path: str | Path) -> None:
    """Refuse entries that every reader (loading, resuming, averaging) would trip over.

    `model` must map weight names to tensors, `model_config` and `config` (when present and
    not null) must be mappings, `spm_model` (when present) bytes and `tgt_spm_model` bytes or
    null. The values inside them are checked where they are used (`ModelConfig`,
    `config_from_dict`, `Tokenizer`).

    Raises:
        ValueError: naming `path`, the entry and the type found.
    """
    weights = state["model"]
    if not isinstance(weights, dict):
        raise ValueError(
            f"{path}: 'model' must be a mapping of weight names to tensors, "
            f"not {type(weights).__name__}"
        )
    for key, value in weights.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise ValueError(
                f"{path}: weight {key!r} of 'model' is a {type(value).__name__}, not a tensor"
            )
    for key, allowed, what in (
        ("model_config", (dict,), "a mapping"),
        ("config", (dict, type(None)), "a mapping or null"),
        ("spm_model", (bytes,), "bytes (a SentencePiece model)"),
        ("tgt_spm_model", (bytes, type(None)), "bytes (a SentencePiece model) or null"),
    ):
        if key in state and not isinstance(state[key], allowed):
            raise ValueError(f"{path}: {key!r} must be {what}, not {type(state[key]).__name__}")


def _damaged_member(path: Path) -> str | None:
    """The first member of a checkpoint's zip archive whose bytes fail their stored CRC-32
    (`zipfile.ZipFile.testzip`), or None; None also for a file that is not a zip archive
    (torch.load then says what it is)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return None


def _load_problem(error: Exception) -> str:
    """The gist of a `torch.load` failure, without PyTorch's advice to load with
    `weights_only=False` (which would run code from the file)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    found = re.search(r"WeightsUnpickler error:\s*(.*?)(?:\s+Please use|\n\n|$)", text, re.S)
    if found:
        return found.group(1).strip()
    found = re.search(r"(Trying to load unsupported GLOBAL [^\n]*)", text)
    if found:  # a pickled call to a blocked function (e.g. os.system): never executed
        return found.group(1).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def strip_wrapper_prefixes(state_dict: dict) -> dict:
    """Remove `module.` (DistributedDataParallel) and `_orig_mod.` (torch.compile) key prefixes."""
    stripped = {}
    for key, value in state_dict.items():
        changed = True
        while changed:
            changed = False
            for prefix in WRAPPER_PREFIXES:
                if key.startswith(prefix):
                    key = key[len(prefix) :]
                    changed = True
        stripped[key] = value
    return stripped


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The plain model inside DistributedDataParallel and/or torch.compile wrappers."""
    while True:
        if hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif isinstance(model, torch.nn.parallel.DistributedDataParallel):
            model = model.module
        else:
            return model


def stored_model_config(stored: dict, path) -> ModelConfig:
    """The checkpoint's `model_config` mapping (`check_entry_types`) as a ModelConfig, or a
    ValueError naming the file (what loading and `transformer-average` accept)."""
    stored = {k: v for k, v in stored.items() if k not in RETIRED_KEYS["model"]}
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(stored) - known)
    if unknown:
        raise ValueError(
            f"{path}: model_config has keys this version does not know: {unknown} "
            "(written by a newer version of the code?)"
        )
    try:
        return ModelConfig(**stored)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: invalid model_config: {error}") from error


def check_tied_weights(state_dict: dict, model: torch.nn.Module, path: str | Path) -> None:
    """Refuse a state dict whose copies of one tied matrix hold different values.

    The Transformer ties its embeddings and output projection (section 3.4): one matrix under
    several state_dict keys (`src_embed.weight`, `tgt_embed.weight` and
    `output_projection.weight` with `share_embeddings`; the last two without). `torch.save` of
    our state dict stores it once; a state dict edited after loading, or written by another
    tool, may hold separate copies. Equal copies are fine (equal values, NaN at the same
    places, or one tensor under several keys); different ones would otherwise be loaded
    silently (the last key wins) or averaged by their first key only.

    Args:
        state_dict: The stored weights, wrapper prefixes stripped.
        model: The model they are for (its tied keys name one tensor); may be on "meta".
        path: The file, named in the error.

    Raises:
        ValueError: naming `path` and the keys of the first tied matrix whose copies differ.
    """
    keys_of_tensor: dict[int, list[str]] = {}
    for key, tensor in model.state_dict(keep_vars=True).items():
        keys_of_tensor.setdefault(id(tensor), []).append(key)
    for tied in keys_of_tensor.values():
        stored = [key for key in tied if key in state_dict]  # load_state_dict reports the rest
        for key in stored[1:]:
            if not _same_values(state_dict[stored[0]], state_dict[key]):
                raise ValueError(
                    f"{path}: tied weights {stored[0]!r} and {key!r} differ (the model uses "
                    f"one matrix for {', '.join(tied)}); refusing to pick one of them"
                )


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two stored copies of a matrix hold the same values: same shape, equal elements,
    NaN where the other has NaN (`torch.equal` calls NaN unequal to itself). Views of the same
    memory are the same values without looking at them."""
    if a.shape != b.shape:
        return False
    if (a.untyped_storage().data_ptr(), a.storage_offset(), a.stride()) == (
        b.untyped_storage().data_ptr(),
        b.storage_offset(),
        b.stride(),
    ):
        return True
    if torch.equal(a, b):
        return True
    both_nan = a.isnan() & b.isnan()  # (shape) bool; all False for integer tensors
    return bool(both_nan.any()) and bool(((a == b) | both_nan).all())


def load_checkpoint(
    path: str | Path, device: str | torch.device = "cpu"
) -> tuple[Transformer, Tokenizer, Config]:
    """Rebuild the model, tokenizer and config from a checkpoint file alone.

    Args:
        path: Checkpoint written by training or by `transformer-average`.
        device: Where the model goes.

    Returns:
        (model in eval mode on `device`, tokenizer, full config).

    Raises:
        FileNotFoundError, ValueError: see `read_checkpoint`; ValueError also when the weights
            do not fit the stored model config, when copies of a tied matrix differ
            (`check_tied_weights`), or for an unknown or unavailable device.
    """
    device = resolve_device(device, what="device")
    state = read_checkpoint(path)
    model_config = stored_model_config(state["model_config"], path)
    model = Transformer(model_config)
    weights = strip_wrapper_prefixes(state["model"])
    check_tied_weights(weights, model, path)
    try:
        model.load_state_dict(weights)
    except RuntimeError as error:
        raise ValueError(
            f"{path}: weights do not match the stored model config: {error}"
        ) from error
    model.to(device).eval()
    if "spm_model" not in state:
        raise ValueError(f"{path}: checkpoint has no 'spm_model' entry")
    try:
        tokenizer = Tokenizer(state["spm_model"], state.get("tgt_spm_model"))
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error
    config = config_from_dict(state.get("config") or {}, source=str(path), drop_retired=True)
    config = Config(model=model_config, data=config.data, train=config.train, decode=config.decode)
    return model, tokenizer, config
