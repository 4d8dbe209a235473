"""Tests for transformer/data/hub.py: the Hub's retry warnings held back during a download."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from transformer.data import multi30k
from transformer.data.hf_corpus import load_hf
from transformer.data.hub import quiet_hub_retries

RETRIES = "huggingface_hub.utils._http"  # where huggingface_hub logs "Retrying in 4s"


def test_retry_warnings_are_held_back_errors_kept_and_the_level_restored():
    hub = logging.getLogger("huggingface_hub")
    before = hub.level
    with quiet_hub_retries():
        assert not logging.getLogger(RETRIES).isEnabledFor(logging.WARNING)
        assert logging.getLogger(RETRIES).isEnabledFor(logging.ERROR)
    assert hub.level == before
    with pytest.raises(KeyError), quiet_hub_retries():
        raise KeyError("the download failed")
    assert hub.level == before


def _record_warnings_enabled(monkeypatch) -> list[bool]:
    """Replace datasets.load_dataset by one that notes whether retry warnings would show."""
    datasets = pytest.importorskip("datasets")
    seen = []

    def load_dataset(*args, **kwargs):
        seen.append(logging.getLogger(RETRIES).isEnabledFor(logging.WARNING))
        raise ConnectionError("Couldn't reach the Hub")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return seen


def test_both_hub_loaders_download_with_the_warnings_held_back(monkeypatch, tmp_path):
    """Offline, each download printed some 12 retry lines over 25 s before its error."""
    seen = _record_warnings_enabled(monkeypatch)
    hub = logging.getLogger("huggingface_hub")
    monkeypatch.setattr(hub, "level", logging.WARNING)  # its default: retries would show
    logging.getLogger(RETRIES)._cache.clear()
    monkeypatch.delenv("TRANSFORMER_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="could not load Hugging Face dataset 'some/corpus'"):
        load_hf("hf:some/corpus::train", "en", "de")
    with pytest.raises(FileNotFoundError, match="could not download"):
        multi30k.find_multi30k(Path(tmp_path / "download"))
    assert seen == [False, False]
