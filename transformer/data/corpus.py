"""Reading parallel text: local file pairs or Hugging Face `datasets` splits.

A corpus spec is either
- a local path prefix: `multi30k/train` with languages `en`, `de` reads `multi30k/train.en`
  and `multi30k/train.de` (UTF-8, one sentence per line, line i of one file translates line i
  of the other). A relative prefix is resolved against $TRANSFORMER_DATA_DIR when it is set,
  else against the current directory;
- `hf:NAME:CONFIG:SPLIT`, e.g. `hf:wmt14:de-en:train` or `hf:bentrevett/multi30k::train`
  (empty CONFIG = the dataset's default). Rows must carry a `translation` dict keyed by
  language code (wmt14 style) or one column per language code. Loading, caching and
  streaming are the `datasets` library's own.

Either direction comes from the same files: swap `source_lang` and `target_lang`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

HF_PREFIX = "hf:"


@dataclass
class ParallelText:
    """Aligned raw sentences of one corpus split.

    Attributes:
        src: Source sentences, one per pair.
        tgt: Target sentences, `len(tgt) == len(src)`.
        name: The spec it came from (for messages).
        fingerprint: A hex digest identifying the content (file bytes, or the `datasets`
            fingerprint), used as a cache key.
    """

    src: list[str]
    tgt: list[str]
    name: str
    fingerprint: str

    def __len__(self) -> int:
        return len(self.src)


def resolve_prefix(prefix: str | Path) -> Path:
    """Resolve a relative path prefix against $TRANSFORMER_DATA_DIR (when set) or the cwd."""
    path = Path(prefix).expanduser()
    if path.is_absolute():
        return path
    base = os.environ.get("TRANSFORMER_DATA_DIR")
    return (Path(base).expanduser() if base else Path.cwd()) / path


def read_lines(path: str | Path) -> list[str]:
    """Read a UTF-8 text file as a list of lines (without the line ending).

    Only "\\n" separates lines ("\\r\\n" is accepted); other Unicode line separators stay
    inside the sentence, so line numbers match `wc -l` and the other side of the pair.

    Raises:
        FileNotFoundError: naming the missing path.
        ValueError: on invalid UTF-8, naming the file and the 1-based line number.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"corpus file not found: {path}")
    return decode_lines(path.read_bytes(), str(path))


def decode_lines(data: bytes, name: str) -> list[str]:
    """The lines of UTF-8 `data` (see `read_lines`; a leading byte-order mark is dropped).

    Raises:
        ValueError: on invalid UTF-8, naming `name` (a file, or "<stdin>") and the line.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1)
        raise ValueError(
            f"{name}: line {line} is not valid UTF-8 ({error.reason} at byte {column} of the line)"
        ) from error
    if text.startswith("\ufeff"):
        text = text[1:]
    return split_lines(text)


def split_lines(text: str) -> list[str]:
    """The lines of `text` without line endings: only "\\n" separates lines ("\\r\\n" is
    accepted), and a final line ending does not start another (empty) line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _file_digest(paths: list[Path]) -> str:
    """Hash the bytes of the given files (the cache key of local corpora)."""
    digest = hashlib.blake2b(digest_size=16)
    for path in paths:
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        digest.update(b"\0file-end\0")
    return digest.hexdigest()


def local_paths(prefix: str | Path, source_lang: str, target_lang: str) -> tuple[Path, Path]:
    """The two files of a local corpus: `PREFIX.SRC` and `PREFIX.TGT` (resolved, checked).

    Raises:
        FileNotFoundError: naming the missing file and where relative paths resolve.
    """
    base = resolve_prefix(prefix)
    paths = (base.parent / f"{base.name}.{source_lang}", base.parent / f"{base.name}.{target_lang}")
    for path in paths:
        if not path.is_file():
            hint = "" if Path(prefix).is_absolute() else _relative_hint()
            raise FileNotFoundError(f"corpus file not found: {path}{hint}")
    return paths


def read_local(prefix: str | Path, source_lang: str, target_lang: str) -> ParallelText:
    """Read `PREFIX.SRC` and `PREFIX.TGT` as aligned sentence pairs.

    Raises:
        FileNotFoundError: naming the missing file (and where relative paths resolve).
        ValueError: invalid UTF-8 (file and line), or different line counts (both files and
            both counts).
    """
    src_path, tgt_path = local_paths(prefix, source_lang, target_lang)
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise ValueError(
            f"parallel files are misaligned: {src_path} has {len(src)} lines but "
            f"{tgt_path} has {len(tgt)} lines"
        )
    return ParallelText(src, tgt, str(prefix), _file_digest([src_path, tgt_path]))


def _relative_hint() -> str:
    """Say where relative corpus paths are resolved (part of a not-found message)."""
    base = os.environ.get("TRANSFORMER_DATA_DIR")
    if base:
        return f" (relative paths are resolved against TRANSFORMER_DATA_DIR={base})"
    return (
        f" (relative paths are resolved against the current directory {Path.cwd()}; "
        "set TRANSFORMER_DATA_DIR to resolve them elsewhere)"
    )


def parse_hf_spec(spec: str) -> tuple[str, str | None, str]:
    """Split `hf:NAME:CONFIG:SPLIT` into (name, config or None, split).

    Raises:
        ValueError: when the spec does not have exactly four ':'-separated parts.
    """
    parts = spec[len(HF_PREFIX) :].split(":") if spec.startswith(HF_PREFIX) else []
    if len(parts) != 3 or not parts[0] or not parts[2]:
        raise ValueError(
            f"datasets spec {spec!r} must look like hf:NAME:CONFIG:SPLIT, "
            "e.g. hf:wmt14:de-en:train (CONFIG may be empty: hf:bentrevett/multi30k::train)"
        )
    name, config, split = parts
    return name, config or None, split


def _load_hf(spec: str, source_lang: str, target_lang: str):
    """`datasets.load_dataset` for an `hf:` spec, with one clear error when it fails."""
    name, config, split = parse_hf_spec(spec)
    import datasets  # heavy import, only needed for hub corpora

    try:
        return datasets.load_dataset(name, config, split=split)
    except Exception as error:  # the hub raises many types (ConnectionError, OSError, ...)
        raise ValueError(
            f"could not load Hugging Face dataset {name!r} (config {config!r}, split "
            f"{split!r}) for {spec!r}: {type(error).__name__}: {error}. Without network "
            "access, use local files instead: write one sentence per line to PREFIX."
            f"{source_lang} and PREFIX.{target_lang} and set the corpus to PREFIX "
            "(relative to TRANSFORMER_DATA_DIR), e.g. data.train=multi30k/train"
        ) from error


def _hf_fingerprint(table, spec: str, source_lang: str, target_lang: str) -> str:
    """Cache key of a `datasets` split: its own fingerprint plus the direction."""
    key = f"{spec}|{getattr(table, '_fingerprint', '')}|{source_lang}|{target_lang}"
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


def read_hf(spec: str, source_lang: str, target_lang: str) -> ParallelText:
    """Load a Hugging Face `datasets` split as sentence pairs.

    Raises:
        ValueError: when the dataset cannot be loaded (offline, unknown name/config/split):
            the message names the dataset and how to use local files instead; or when rows
            carry neither a `translation` dict nor columns for both languages.
    """
    table = _load_hf(spec, source_lang, target_lang)
    columns = table.column_names
    if "translation" in columns:
        src, tgt = [], []
        for rows in table.iter(batch_size=10_000):
            for pair in rows["translation"]:
                if source_lang not in pair or target_lang not in pair:
                    raise ValueError(
                        f"{spec}: translation dict has languages {sorted(pair)}, "
                        f"not {source_lang!r} and {target_lang!r}"
                    )
                src.append(pair[source_lang])
                tgt.append(pair[target_lang])
    elif source_lang in columns and target_lang in columns:
        src, tgt = list(table[source_lang]), list(table[target_lang])
    else:
        raise ValueError(
            f"{spec}: rows have columns {columns}; expected a 'translation' dict or "
            f"columns {source_lang!r} and {target_lang!r}"
        )
    return ParallelText(src, tgt, spec, _hf_fingerprint(table, spec, source_lang, target_lang))


def corpus_fingerprint(spec: str, source_lang: str, target_lang: str) -> str:
    """The `ParallelText.fingerprint` of a corpus without decoding its text (for cache lookups).

    Raises:
        FileNotFoundError, ValueError: as `read_parallel`.
    """
    if spec.startswith(HF_PREFIX):
        table = _load_hf(spec, source_lang, target_lang)
        return _hf_fingerprint(table, spec, source_lang, target_lang)
    return _file_digest(list(local_paths(spec, source_lang, target_lang)))


def read_parallel(spec: str, source_lang: str, target_lang: str) -> ParallelText:
    """Read a corpus from a local prefix or an `hf:NAME:CONFIG:SPLIT` spec (see module doc).

    Args:
        spec: Local path prefix or `hf:` spec.
        source_lang: Source language code (file suffix / translation key), e.g. "en".
        target_lang: Target language code, e.g. "de".

    Returns:
        The aligned `ParallelText` (source and target in the requested direction).

    Raises:
        FileNotFoundError, ValueError: see `read_local` and `read_hf`.
    """
    if spec.startswith(HF_PREFIX):  # DataConfig checked that the two languages differ
        return read_hf(spec, source_lang, target_lang)
    return read_local(spec, source_lang, target_lang)
