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
from collections.abc import Iterator
from pathlib import Path

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

    try:
        path = Path(name).expanduser()
        if path.is_dir() and _saved_to_disk(path):
            loaded = datasets.load_from_disk(str(path))
            return loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
        return datasets.load_dataset(name, config, split=split)
    except Exception as error:  # the hub raises many types (ConnectionError, OSError, ...)
        raise ValueError(
            f"could not load Hugging Face dataset {name!r} (config {config!r}, split "
            f"{split!r}) for {spec!r}: {type(error).__name__}: {error}. Without network "
            "access, use local files instead: write one sentence per line to PREFIX."
            f"{source_lang} and PREFIX.{target_lang} and set the corpus to PREFIX "
            "(relative to TRANSFORMER_DATA_DIR), e.g. data.train=wmt14-en-de/train"
        ) from error


def hf_fingerprint(table, spec: str, source_lang: str, target_lang: str) -> str:
    """Cache key of a `datasets` split: its own fingerprint plus the direction."""
    # The dataset's own content hash, not the spec: the same folder named another way is
    # the same corpus.
    key = f"{getattr(table, '_fingerprint', spec)}|{source_lang}|{target_lang}"
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


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
