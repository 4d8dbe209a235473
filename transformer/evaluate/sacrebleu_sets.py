"""sacreBLEU's test sets (e.g. `wmt14/full`), downloaded and cached by sacreBLEU itself."""

from __future__ import annotations

import socket
from pathlib import Path

_OFFLINE_HINT = (
    "without network access, pass local files instead: --src FILE --ref FILE "
    "(for wmt14/full en-de: newstest2014.en and newstest2014.de, e.g. from "
    "$TRANSFORMER_DATA_DIR/wmt14-en-de/)"
)


def fetch_test_set(name: str, langpair: str) -> tuple[Path, list[Path]]:
    """Source and reference files of a sacreBLEU test set, downloading them if needed.

    Args:
        name: sacreBLEU test set name, e.g. "wmt14/full".
        langpair: e.g. "en-de".

    Returns:
        (source file, one file per reference translation).

    Raises:
        ValueError: an unknown test set or language pair, or a failed download (the message
            names the `--src` / `--ref` alternative).
    """
    from sacrebleu.dataset import DATASETS
    from sacrebleu.utils import get_reference_files, get_source_file

    if name not in DATASETS:
        raise ValueError(f"unknown sacreBLEU test set {name!r} (list them with `sacrebleu --list`)")
    pairs = sorted(DATASETS[name].langpairs)
    if langpair not in pairs:
        raise ValueError(
            f"test set {name!r} has no language pair {langpair!r}; available: {', '.join(pairs)}"
        )
    previous_timeout = socket.getdefaulttimeout()
    socket.setdefaulttimeout(60)
    try:
        source = Path(get_source_file(name, langpair))
        references = [Path(p) for p in get_reference_files(name, langpair)]
    except (Exception, SystemExit) as error:  # sacreBLEU raises URLError or exits on failures
        raise ValueError(
            f"could not get sacreBLEU test set {name} ({langpair}): {error}; {_OFFLINE_HINT}"
        ) from error
    finally:
        socket.setdefaulttimeout(previous_timeout)
    return source, references
