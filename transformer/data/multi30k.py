"""Multi30k (Elliott et al., 2016) EN-DE as plain text files: found locally, or downloaded.

The main job (`scripts/quickstart.py`) trains on `train.{en,de}`, validates on `val.{en,de}`
and scores `test_2016_flickr.{en,de}`, one sentence per line. `find_multi30k` looks for them in
`$TRANSFORMER_DATA_DIR/multi30k`, then in a download folder; otherwise it downloads the Hugging
Face dataset `bentrevett/multi30k` with `datasets` (the library does the fetching and caching)
and writes its three splits there. Offline, it fails with a message naming the local-file
alternative.
"""

from __future__ import annotations

import os
from pathlib import Path

from transformer.atomic import atomic_write_text
from transformer.data.hub import quiet_hub_retries

# The dataset's split names and the file names each is written to.
SPLITS = {"train": "train", "validation": "val", "test": "test_2016_flickr"}
LANGS = ("en", "de")


def _data_dir_hint() -> str:
    """The end of the no-data message: what TRANSFORMER_DATA_DIR resolved to, or an example."""
    given = os.environ.get("TRANSFORMER_DATA_DIR")
    if not given:
        return ", e.g. TRANSFORMER_DATA_DIR=/path/to/data"
    resolved = Path(given).expanduser().resolve()
    # A relative value is read from the current directory, which is easy to forget.
    return f" (TRANSFORMER_DATA_DIR={given} is {resolved}, which has no complete multi30k/)"


def find_multi30k(download_dir: Path) -> Path:
    """The folder holding Multi30k's `train/val/test_2016_flickr.{en,de}` files.

    Looks in `$TRANSFORMER_DATA_DIR/multi30k`, then `download_dir`; otherwise downloads the
    Hugging Face dataset `bentrevett/multi30k` into `download_dir`.

    Args:
        download_dir: Where an earlier download is, or where a new one goes.

    Returns:
        An absolute folder path (the trainer does not resolve it against the variable again).

    Raises:
        FileNotFoundError: when the files are not there and the download fails (no network).
    """
    wanted = [f"{name}.{lang}" for name in SPLITS.values() for lang in LANGS]
    candidates = []
    if os.environ.get("TRANSFORMER_DATA_DIR"):
        candidates.append(
            Path(os.environ["TRANSFORMER_DATA_DIR"]).expanduser().resolve() / "multi30k"
        )
    candidates.append(download_dir.expanduser().resolve())
    for folder in candidates:
        if all((folder / name).is_file() for name in wanted):
            return folder
    print(
        f"Multi30k not found in {', '.join(map(str, candidates))}; downloading "
        "bentrevett/multi30k with `datasets` ...",
        flush=True,
    )
    try:
        import datasets

        with quiet_hub_retries():
            dataset = datasets.load_dataset("bentrevett/multi30k")
    except Exception as error:  # datasets raises many kinds of connection errors
        raise FileNotFoundError(
            "could not download the Hugging Face dataset bentrevett/multi30k "
            f"({type(error).__name__}: {error}). Without network access, point "
            "TRANSFORMER_DATA_DIR at a folder holding multi30k/{train,val,test_2016_flickr}"
            ".{en,de}" + _data_dir_hint()
        ) from error
    download_dir.mkdir(parents=True, exist_ok=True)
    for split, name in SPLITS.items():
        for lang in LANGS:
            lines = [row[lang].replace("\n", " ").strip() for row in dataset[split]]
            atomic_write_text(download_dir / f"{name}.{lang}", "\n".join(lines) + "\n")
    return download_dir.expanduser().resolve()
