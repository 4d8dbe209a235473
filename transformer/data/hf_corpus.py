"""Parallel text from Hugging Face `datasets`: the hub (e.g. `wmt/wmt14`) or a local dataset.

A spec `hf:NAME:CONFIG:SPLIT` names what `datasets.load_dataset(NAME, CONFIG, split=SPLIT)`
loads: a hub dataset (`hf:wmt/wmt14:de-en:train`), or a local folder of data files that
`load_dataset` reads (parquet, JSON lines, CSV). A folder written by `Dataset.save_to_disk` or
`DatasetDict.save_to_disk` is opened with `datasets.load_from_disk` (SPLIT picks the split of
a `DatasetDict`). Rows carry a `translation` dict keyed by language code (the WMT layout) or one
column per language code. Loading and caching are the library's own: the table is Arrow,
memory-mapped, and is read here in batches (`iter_hf`), never as one list of every sentence.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from transformer.data.hub import quiet_hub_retries

HF_PREFIX = "hf:"


def parse_hf_spec(spec: str) -> tuple[str, str | None, str]:
    """Split `hf:NAME:CONFIG:SPLIT` into (name, config or None, split).

    Raises:
        ValueError: when the spec does not have exactly four ':'-separated parts.
    """
    parts = spec[len(HF_PREFIX) :].split(":") if spec.startswith(HF_PREFIX) else []
    if len(parts) != 3 or not parts[0] or not parts[2]:
        raise ValueError(
            f"datasets spec {spec!r} must look like hf:NAME:CONFIG:SPLIT, "
            "e.g. hf:wmt/wmt14:de-en:train (CONFIG may be empty: hf:bentrevett/multi30k::train)"
        )
    name, config, split = parts
    return name, config or None, split


def _saved_to_disk(path: Path) -> bool:
    """Whether `path` is a folder written by `save_to_disk` (a Dataset or a DatasetDict)."""
    return (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()


def load_hf(spec: str, source_lang: str, target_lang: str):
    """The `datasets.Dataset` of an `hf:` spec, with one clear error when it cannot be loaded.

    Raises:
        ValueError: offline, an unknown name, config or split: naming the dataset and the
            local-file alternative.
    """
    name, config, split = parse_hf_spec(spec)
    import datasets  # heavy import, only needed for `hf:` corpora

    folder = local_folder(name)
    try:
        if folder is not None and _saved_to_disk(folder):
            loaded = datasets.load_from_disk(str(folder))
            if isinstance(loaded, datasets.DatasetDict):
                if split not in loaded:
                    raise ValueError(f"no split {split!r}; it has {', '.join(loaded)}")
                return loaded[split]
            return loaded
        with quiet_hub_retries():
            return datasets.load_dataset(str(folder or name), config, split=split)
    except Exception as error:  # the hub raises many types (ConnectionError, OSError, ...)
        reason = f"{type(error).__name__}: {str(error).strip().rstrip('.')}"
        if folder is not None or name.startswith(("/", ".", "~")):
            raise ValueError(
                f"could not load the local dataset {name!r} (split {split!r}) for {spec!r}: "
                f"{reason}; give a folder written by save_to_disk or holding parquet / JSON "
                "files, as hf:FOLDER::SPLIT"
            ) from error
        raise ValueError(
            f"could not load Hugging Face dataset {name!r} (config {config!r}, split "
            f"{split!r}) for {spec!r}: {reason}. Without network access, use local files "
            f"instead: one sentence per line in PREFIX.{source_lang} and PREFIX.{target_lang}, "
            "and the corpus set to PREFIX (relative to TRANSFORMER_DATA_DIR), e.g. "
            "data.train=wmt14-en-de/train (and data.valid, data.test likewise)"
        ) from error


def local_folder(name: str) -> Path | None:
    """The local dataset folder an `hf:` NAME names, if any: a path (relative ones are
    resolved against $TRANSFORMER_DATA_DIR when it is set and holds them, else the current
    directory), absolute; None for a hub name."""
    path = Path(name).expanduser()
    base = os.environ.get("TRANSFORMER_DATA_DIR")
    for candidate in (
        [Path(base).expanduser() / path] if base and not path.is_absolute() else []
    ) + [path]:
        if candidate.is_dir():
            return candidate.absolute()
    return None


def hf_fingerprint(table, spec: str, source_lang: str, target_lang: str) -> str:
    """Cache key of a `datasets` split: a hash of its sentences, source side then target.

    `datasets`' own fingerprint of a folder of parquet or JSON files depends on the files'
    paths and times, so a copy, a move or a `touch` would look like another corpus (and
    refuse to resume a run). The sentences themselves are hashed instead, from the Arrow
    string buffers (no Python strings: about a second per GB), chunking independent. A
    dataset with an indices mapping (after `select` or `shuffle`) keeps its own fingerprint.
    """
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{source_lang}|{target_lang}|".encode())
    if getattr(table, "_indices", None) is not None or not hasattr(table.data, "table"):
        digest.update(str(getattr(table, "_fingerprint", spec)).encode())
        return digest.hexdigest()
    arrow = table.data.table
    for lang in (source_lang, target_lang):
        layout = "translation" if "translation" in arrow.column_names else lang
        if layout not in arrow.column_names:  # iter_hf names the problem
            continue
        lengths = hashlib.blake2b(digest_size=16)
        for chunk in arrow.column(layout).chunks:
            if layout == "translation":
                if chunk.type.get_field_index(lang) < 0:
                    continue
                chunk = chunk.flatten()[chunk.type.get_field_index(lang)]
            _hash_strings(chunk, digest, lengths)
        digest.update(lengths.digest())
    return digest.hexdigest()


def _hash_strings(array, digest, lengths) -> None:
    """Feed a (large) string array's characters to `digest` and its lengths to `lengths`."""
    import numpy as np

    if len(array) == 0:
        return
    width = np.int64 if str(array.type) in ("large_string", "large_utf8") else np.int32
    offsets = np.frombuffer(array.buffers()[1], dtype=width)[
        array.offset : array.offset + len(array) + 1
    ]
    data = array.buffers()[2]
    if data is not None:
        digest.update(memoryview(data)[int(offsets[0]) : int(offsets[-1])])
    lengths.update(np.diff(offsets).astype(np.int64).tobytes())


def iter_hf(
    table, spec: str, source_lang: str, target_lang: str, batch_size: int
) -> Iterator[tuple[list[str], list[str]]]:
    """The pairs of a loaded split in batches of `batch_size` rows (Arrow batched reading).

    Yields:
        (source sentences, target sentences) of each batch, in row order.

    Raises:
        ValueError: rows with neither a `translation` dict nor columns for both languages,
            or a translation dict that lacks one of them (naming the row).
    """
    columns = table.column_names
    if "translation" in columns:
        first = 0
        for rows in table.iter(batch_size=batch_size):
            pairs = rows["translation"]
            bad = next(
                (i for i, p in enumerate(pairs) if not _has(p, source_lang, target_lang)), None
            )
            if bad is not None:
                languages = sorted(k for k, v in (pairs[bad] or {}).items() if v is not None)
                raise ValueError(
                    f"{spec}: row {first + bad} has a translation of languages {languages}, "
                    f"not {source_lang!r} and {target_lang!r}"
                )
            yield [p[source_lang] for p in pairs], [p[target_lang] for p in pairs]
            first += len(pairs)
    elif source_lang in columns and target_lang in columns:
        first = 0
        for rows in table.iter(batch_size=batch_size):
            src, tgt = rows[source_lang], rows[target_lang]
            for lang, side in ((source_lang, src), (target_lang, tgt)):
                bad = next((i for i, x in enumerate(side) if not isinstance(x, str)), None)
                if bad is not None:
                    raise ValueError(
                        f"{spec}: row {first + bad} has {side[bad]!r} in column {lang!r}, "
                        "not a sentence"
                    )
            yield src, tgt
            first += len(src)
    else:
        raise ValueError(
            f"{spec}: rows have columns {columns}; expected a 'translation' dict or "
            f"columns {source_lang!r} and {target_lang!r}"
        )


def _has(pair, source_lang: str, target_lang: str) -> bool:
    """Whether a translation dict holds both languages as strings."""
    return isinstance(pair, dict) and all(
        isinstance(pair.get(lang), str) for lang in (source_lang, target_lang)
    )
