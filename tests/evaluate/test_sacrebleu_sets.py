"""Tests for transformer/evaluate/sacrebleu_sets.py: sacreBLEU test sets, and the local alternative.

There is no network here: sacreBLEU's download functions are replaced with monkeypatch, and
its own table of test sets (`sacrebleu.dataset.DATASETS`) is the reference for names and
language pairs.
"""

from __future__ import annotations

import socket
import urllib.error
from pathlib import Path

import pytest
from sacrebleu.dataset import DATASETS

from transformer.evaluate.sacrebleu_sets import fetch_test_set

LOCAL_ALTERNATIVE = "--src FILE --ref FILE"


@pytest.fixture
def offline(monkeypatch):
    """sacreBLEU's downloads fail as they do without network; returns the calls made."""
    calls = []

    def fail(*args, **kwargs):
        calls.append(args)
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr("sacrebleu.utils.get_source_file", fail)
    monkeypatch.setattr("sacrebleu.utils.get_reference_files", fail)
    return calls


def test_an_unknown_test_set_is_named_before_any_download(offline):
    assert "wmt99" not in DATASETS
    with pytest.raises(ValueError, match=r"unknown sacreBLEU test set 'wmt99'.*sacrebleu --list"):
        fetch_test_set("wmt99", "en-de")
    assert offline == []


def test_an_unknown_language_pair_lists_the_test_sets_pairs(offline):
    with pytest.raises(ValueError) as error:
        fetch_test_set("wmt14/full", "xx-de")
    pairs = ", ".join(sorted(DATASETS["wmt14/full"].langpairs))
    assert str(error.value) == (
        f"test set 'wmt14/full' has no language pair 'xx-de'; available: {pairs}"
    )
    assert offline == []


def test_an_offline_failure_names_the_test_set_and_the_local_alternative(offline):
    with pytest.raises(ValueError) as error:
        fetch_test_set("wmt14/full", "en-de")
    message = str(error.value)
    assert message.startswith("could not get sacreBLEU test set wmt14/full (en-de): ")
    assert "Name or service not known" in message and LOCAL_ALTERNATIVE in message
    assert offline == [("wmt14/full", "en-de")]


def test_sacrebleu_exiting_is_a_failure_like_any_other(monkeypatch):
    def exits(*args, **kwargs):
        raise SystemExit(1)  # what sacreBLEU does on some download failures

    monkeypatch.setattr("sacrebleu.utils.get_source_file", exits)
    with pytest.raises(ValueError, match=LOCAL_ALTERNATIVE):
        fetch_test_set("wmt14/full", "en-de")


def test_downloaded_files_are_returned_as_paths_and_the_timeout_is_restored(monkeypatch):
    seen_timeouts = []

    def source(name, langpair):
        seen_timeouts.append(socket.getdefaulttimeout())
        return f"/cache/{name}.{langpair}.src"

    monkeypatch.setattr("sacrebleu.utils.get_source_file", source)
    monkeypatch.setattr(
        "sacrebleu.utils.get_reference_files", lambda name, pair: [f"/cache/{pair}.ref"]
    )
    before = socket.getdefaulttimeout()
    src, refs = fetch_test_set("wmt14/full", "en-de")
    assert src == Path("/cache/wmt14/full.en-de.src") and refs == [Path("/cache/en-de.ref")]
    assert seen_timeouts == [60]  # a dead network fails within a minute, not never
    assert socket.getdefaulttimeout() == before
