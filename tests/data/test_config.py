"""Tests for transformer/data/config.py: `DataConfig` rejects out-of-range values by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from transformer.config import config_from_dict
from transformer.data.config import MIN_SPM_VOCAB, DataConfig


def test_defaults_read_multi30k_english_to_german():
    data = DataConfig()
    assert (data.source_lang, data.target_lang) == ("en", "de")
    assert (data.train, data.valid) == ("multi30k/train", "multi30k/val")
    assert data.shared_vocab and data.spm_model_type == "bpe"


def test_data_vocab_size_below_the_special_tokens_is_named():
    with pytest.raises(ValueError, match=r"data\.vocab_size \(3\)"):
        config_from_dict({"data": {"vocab_size": 3}})


def test_the_smallest_vocabulary_holds_the_four_special_tokens_and_a_character():
    DataConfig(vocab_size=MIN_SPM_VOCAB)
    with pytest.raises(
        ValueError, match=rf"data\.vocab_size \(4\) must be at least {MIN_SPM_VOCAB}"
    ):
        DataConfig(vocab_size=MIN_SPM_VOCAB - 1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(spm_model_type="word"), r"spm_model_type \('word'\)"),
        # Blank: training failed later with "corpus file not found: .../data.en".
        (dict(train=""), r"^data\.train \(''\) is blank: give a corpus prefix such as multi"),
        (dict(source_lang=""), r"^data\.source_lang is blank: give a language code such as en"),
        (dict(max_len=0), r"max_len \(0\) must be at least 1"),
        (dict(target_lang="en"), "source_lang and target_lang are both 'en'"),
        (dict(spm_input_sentence_size=0), r"spm_input_sentence_size \(0\)"),
        (dict(spm_character_coverage=0.0), r"spm_character_coverage \(0\.0\)"),
        (dict(spm_character_coverage=1.5), r"spm_character_coverage \(1\.5\)"),
        (dict(spm_character_coverage=0.97), r"spm_character_coverage \(0\.97\) must be in \[0\.98"),
        (dict(max_len_ratio=0.5), r"^data\.max_len_ratio \(0\.5\) must be a finite number >= 1"),
        (dict(max_len_ratio=float("nan")), r"^data\.max_len_ratio \(nan\) must be a finite number"),
        (dict(max_len_ratio=float("inf")), r"^data\.max_len_ratio \(inf\) must be a finite number"),
        (dict(bpe_dropout=1.0), r"^data\.bpe_dropout \(1\.0\) must be in \[0, 1\)"),
        (dict(bpe_dropout=-0.1), r"^data\.bpe_dropout \(-0\.1\) must be in \[0, 1\)"),
        (dict(bpe_dropout=float("nan")), r"^data\.bpe_dropout \(nan\) must be in"),
        (
            dict(bpe_dropout=0.1, spm_model_type="unigram"),
            r"^data\.bpe_dropout \(0\.1\) needs data\.spm_model_type: bpe \(not 'unigram'\)",
        ),
    ],
)
def test_bad_values_name_the_field_and_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataConfig(**kwargs)


@pytest.mark.parametrize("ratio", [None, 1, 1.0, 1.5, 1e300])
def test_a_finite_length_ratio_of_at_least_one_or_null_is_kept(ratio):
    assert DataConfig(max_len_ratio=ratio).max_len_ratio == ratio


@pytest.mark.parametrize("p", [0.0, 0.1, 0.999])
def test_a_bpe_dropout_in_zero_to_one_is_kept(p):
    assert DataConfig(bpe_dropout=p).bpe_dropout == p
    assert DataConfig().bpe_dropout == 0.0  # off: the paper


def test_a_relative_cache_dir_is_under_the_current_directory_as_the_readme_says(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "runs" / "run"
    cache = DataConfig(cache_dir="shared/cache").cache_directory(run_dir)
    assert cache.resolve() == tmp_path / "shared" / "cache"  # not under run_dir
    assert DataConfig().cache_directory(run_dir) == run_dir / "cache"
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (row,) = [line for line in readme.splitlines() if line.startswith("| `data.cache_dir` |")]
    assert "a relative path is resolved against the current directory" in row
