"""Reading parallel text: local file pairs or Hugging Face `datasets` splits.

A corpus spec is either
- a local path prefix: `multi30k/train` with languages `en`, `de` reads `multi30k/train.en`
  and `multi30k/train.de` (UTF-8, one sentence per line, line i of one file translates line i
  of the other). A relative prefix is resolved against $TRANSFORMER_DATA_DIR when it is set,
  else against the current directory;
- `hf:NAME:CONFIG:SPLIT`, e.g. `hf:wmt/wmt14:de-en:train` or `hf:bentrevett/multi30k::train`
  (empty CONFIG = the dataset's default), or a local dataset folder
  (`transformer.data.hf_corpus`).

`read_parallel` returns a whole split (validation sets); `iter_parallel` yields a training
corpus in chunks of pairs, so that 4.5M pairs are never one list of 9M strings.

Either direction comes from the same files: swap `source_lang` and `target_lang`.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from transformer.data.hf_corpus import HF_PREFIX, hf_fingerprint, iter_hf, load_hf


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

    A pipe reads as a file does (`--src /dev/stdin`, the shell's `<(...)`): it is read once,
    to its end.

    Raises:
        FileNotFoundError: naming the missing path.
        IsADirectoryError: naming the directory.
        ValueError: on invalid UTF-8, naming the file and the 1-based line number.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"corpus file not found: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a text file")
    return decode_lines(path.read_bytes(), str(path))  # a pipe: read once, to its end


def decode_lines(data: bytes, name: str, first_line: int = 1) -> list[str]:
    """The lines of UTF-8 `data` (see `read_lines`; a leading byte-order mark is dropped).

    Args:
        data: Whole lines of a file (or the whole file).
        name: How messages name the file ("<stdin>", a path).
        first_line: The 1-based number of the first line of `data` in its file.

    Raises:
        ValueError: on invalid UTF-8, naming `name` and the line.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + first_line
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1)
        raise ValueError(
            f"{name}: line {line} is not valid UTF-8 ({error.reason} at byte {column} of the line)"
        ) from error
    if first_line == 1 and text.startswith("\ufeff"):
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


def read_hf(spec: str, source_lang: str, target_lang: str) -> ParallelText:
    """Load a Hugging Face `datasets` split as sentence pairs (`transformer.data.hf_corpus`).

    Raises:
        ValueError: when the dataset cannot be loaded (offline, unknown name/config/split):
            the message names the dataset and how to use local files instead; or when rows
            carry neither a `translation` dict nor columns for both languages.
    """
    table = load_hf(spec, source_lang, target_lang)
    src, tgt = [], []
    for src_part, tgt_part in iter_hf(table, spec, source_lang, target_lang, 10_000):
        src += src_part
        tgt += tgt_part
    return ParallelText(src, tgt, spec, hf_fingerprint(table, spec, source_lang, target_lang))


def corpus_fingerprint(spec: str, source_lang: str, target_lang: str) -> str:
    """The `ParallelText.fingerprint` of a corpus without decoding its text (for cache lookups).

    Raises:
        FileNotFoundError, ValueError: as `read_parallel`.
    """
    if spec.startswith(HF_PREFIX):
        table = load_hf(spec, source_lang, target_lang)
        return hf_fingerprint(table, spec, source_lang, target_lang)
    return _file_digest(list(local_paths(spec, source_lang, target_lang)))


def corpus_size(spec: str, source_lang: str, target_lang: str) -> int:
    """Number of pairs of a corpus (lines of its source file, rows of a dataset), without
    decoding it: the total of a progress bar, the sampling rate of the vocabulary's sample.

    Raises:
        FileNotFoundError, ValueError: as `read_parallel`.
    """
    if spec.startswith(HF_PREFIX):
        return len(load_hf(spec, source_lang, target_lang))
    return count_lines(local_paths(spec, source_lang, target_lang)[0])


def count_lines(path: str | Path) -> int:
    """Lines of a file as `decode_lines` splits it ("\\n" counted in 16 MiB reads; a last line
    without one counts too), without holding the file: a corpus's size, a progress bar's total.

    Raises:
        OSError: the file cannot be read.
    """
    count, last = 0, b"\n"
    with open(path, "rb") as file:
        while block := file.read(1 << 24):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def iter_parallel(
    spec: str, source_lang: str, target_lang: str, chunk_pairs: int = 100_000
) -> Iterator[tuple[list[str], list[str]]]:
    """A corpus in chunks of at most `chunk_pairs` pairs, in order (see `read_parallel`).

    Yields:
        (source sentences, target sentences), aligned, `chunk_pairs` long except the last.

    Raises:
        FileNotFoundError, ValueError: as `read_parallel` (a misaligned local pair of files
            is found when the shorter one ends).
    """
    if spec.startswith(HF_PREFIX):
        table = load_hf(spec, source_lang, target_lang)
        yield from iter_hf(table, spec, source_lang, target_lang, chunk_pairs)
        return
    src_path, tgt_path = local_paths(spec, source_lang, target_lang)
    with open(src_path, "rb") as src_file, open(tgt_path, "rb") as tgt_file:
        first = 1
        while True:
            src_raw = list(itertools.islice(src_file, chunk_pairs))
            tgt_raw = list(itertools.islice(tgt_file, chunk_pairs))
            if len(src_raw) != len(tgt_raw):
                src_n = first - 1 + len(src_raw) + sum(1 for _ in src_file)
                tgt_n = first - 1 + len(tgt_raw) + sum(1 for _ in tgt_file)
                raise ValueError(
                    f"parallel files are misaligned: {src_path} has {src_n} lines but "
                    f"{tgt_path} has {tgt_n} lines"
                )
            if not src_raw:
                return
            src = decode_lines(b"".join(src_raw), str(src_path), first)
            tgt = decode_lines(b"".join(tgt_raw), str(tgt_path), first)
            yield src, tgt
            first += len(src_raw)


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
