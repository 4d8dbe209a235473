"""`hf:` corpora through Hugging Face `datasets`: the spec, the offline error, both row layouts,
and local datasets written by `datasets` itself (parquet files, `save_to_disk`), read by the
same code that reads the hub. The reference is the same text read from local files."""

from __future__ import annotations

import numpy as np
import pytest

from transformer.data.config import DataConfig
from transformer.data.corpus import iter_parallel, read_lines, read_parallel
from transformer.data.hf_corpus import parse_hf_spec
from transformer.data.prepare import prepare_data

# A dependency of the project, but the lent GPU machine has none: skip there, not fail collection.
datasets = pytest.importorskip("datasets")
pytest.importorskip("huggingface_hub.constants")  # installed with datasets

N = 3000


@pytest.fixture
def multi30k(shared_data):
    prefix = shared_data / "multi30k" / "train"
    en, de = read_lines(f"{prefix}.en")[:N], read_lines(f"{prefix}.de")[:N]
    return en, de


def write_local(tmp_path, en, de):
    for lang, lines in (("en", en), ("de", de)):
        (tmp_path / f"train.{lang}").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    return str(tmp_path / "train")


def test_hf_spec_syntax():
    assert parse_hf_spec("hf:wmt/wmt14:de-en:train") == ("wmt/wmt14", "de-en", "train")
    assert parse_hf_spec("hf:bentrevett/multi30k::validation") == (
        "bentrevett/multi30k",
        None,
        "validation",
    )
    for bad in ("hf:wmt14", "hf:wmt14:de-en", "hf::de-en:train", "hf:a:b:c:d"):
        with pytest.raises(ValueError, match="hf:NAME:CONFIG:SPLIT"):
            parse_hf_spec(bad)


def test_hf_offline_error_names_dataset_and_local_alternative(hub_offline):
    with pytest.raises(ValueError) as info:
        read_parallel("hf:wmt/wmt14:de-en:train", "en", "de")
    message = str(info.value)
    assert "'wmt/wmt14'" in message and "de-en" in message
    assert "local files" in message and "PREFIX.en" in message and "PREFIX.de" in message


def test_offline_the_error_comes_before_any_work(hub_offline, multi30k, tmp_path):
    train = write_local(tmp_path, *multi30k)
    config = DataConfig(train=train, valid="hf:wmt/wmt14:de-en:validation", vocab_size=500)
    with pytest.raises(ValueError, match="could not load Hugging Face dataset 'wmt/wmt14'"):
        prepare_data(config, tmp_path / "run", log=None)
    assert not (tmp_path / "run" / "spm.model").exists()  # nothing trained or encoded


def test_rows_with_translation_dict_or_language_columns(monkeypatch):
    tables = {
        "pairs": datasets.Dataset.from_dict(
            {"translation": [{"de": "Hallo", "en": "Hello"}, {"de": "Welt", "en": "World"}]}
        ),
        "columns": datasets.Dataset.from_dict({"en": ["Hello"], "de": ["Hallo"]}),
        "other": datasets.Dataset.from_dict({"text": ["?"]}),
    }
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config, split: tables[name])
    text = read_parallel("hf:pairs:de-en:train", "de", "en")
    assert text.src == ["Hallo", "Welt"] and text.tgt == ["Hello", "World"]
    assert read_parallel("hf:columns::train", "en", "de").tgt == ["Hallo"]
    with pytest.raises(ValueError, match="'translation' dict"):
        read_parallel("hf:other::train", "en", "de")
    with pytest.raises(ValueError, match=r"row 0 has a translation of languages \['de', 'en'\]"):
        read_parallel("hf:pairs:de-en:train", "en", "fr")


@pytest.mark.parametrize("layout", ["parquet", "save_to_disk", "dataset_dict"])
def test_a_local_dataset_prepares_as_the_same_text_in_files(
    hub_offline, multi30k, tmp_path, layout
):
    en, de = multi30k
    table = datasets.Dataset.from_dict(
        {"translation": [{"en": s, "de": t} for s, t in zip(en, de, strict=True)]}
    )
    folder = tmp_path / "dataset"
    if layout == "parquet":  # what `load_dataset` reads from a folder of data files
        folder.mkdir()
        table.to_parquet(str(folder / "train.parquet"))
    elif layout == "save_to_disk":
        table.save_to_disk(str(folder))
    else:
        datasets.DatasetDict({"train": table, "validation": table.select(range(50))}).save_to_disk(
            str(folder)
        )
    spec = f"hf:{folder}::train"
    chunks = list(iter_parallel(spec, "en", "de", chunk_pairs=1000))  # Arrow batches
    assert [len(s) for s, _ in chunks] == [1000, 1000, 1000]
    assert sum((s for s, _ in chunks), []) == en and sum((t for _, t in chunks), []) == de
    from_hf = prepare_data(
        DataConfig(train=spec, valid=None, vocab_size=500), tmp_path / "a", log=None
    )
    local = write_local(tmp_path, en, de)
    from_files = prepare_data(
        DataConfig(train=local, valid=None, vocab_size=500), tmp_path / "b", log=None
    )
    assert from_hf.tokenizer.src_model_bytes == from_files.tokenizer.src_model_bytes
    for name in ("src_tokens", "src_offsets", "tgt_tokens", "tgt_offsets", "line_numbers"):
        np.testing.assert_array_equal(getattr(from_hf.train, name), getattr(from_files.train, name))


def test_training_reads_a_local_dataset(hub_offline, multi30k, tmp_path, tiny_run):
    from transformer.cli.train import main as train

    en, de = multi30k
    folder = tmp_path / "dataset"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"en": en, "de": de})}).save_to_disk(
        str(folder)
    )
    run_dir = tmp_path / "run"
    argv = ["--config", str(tiny_run.config_path), f"train.output_dir={run_dir}"]
    overrides = [f"data.train=hf:{folder}::train", "data.vocab_size=500", "train.max_steps=2"]
    assert train([*argv, *tiny_run.fast, *overrides]) == 0
    assert (run_dir / "checkpoint_last.pt").is_file()
    assert [r["step"] for r in tiny_run.records(run_dir)] == [1, 2]


def test_a_column_without_a_sentence_is_one_line_naming_the_row(hub_offline, tmp_path):
    folder = tmp_path / "cols"
    datasets.Dataset.from_dict({"en": ["a", None, "c"], "de": ["x", "y", "z"]}).save_to_disk(
        str(folder)
    )
    with pytest.raises(ValueError, match=r"row 1 has None in column 'en', not a sentence"):
        read_parallel(f"hf:{folder}::train", "en", "de")


def test_the_fingerprint_is_the_sentences_not_the_files(hub_offline, multi30k, tmp_path):
    import os
    import shutil

    from transformer.data.corpus import corpus_fingerprint

    en, de = multi30k
    pairs = datasets.Dataset.from_dict(
        {"translation": [{"en": s, "de": t} for s, t in zip(en, de, strict=True)]}
    )
    (tmp_path / "parquet").mkdir()
    pairs.to_parquet(str(tmp_path / "parquet" / "train.parquet"))
    pairs.save_to_disk(str(tmp_path / "disk"))
    datasets.Dataset.from_dict({"en": en, "de": de}).save_to_disk(str(tmp_path / "columns"))
    shutil.copytree(tmp_path / "parquet", tmp_path / "copy")  # a copy, then touched
    os.utime(tmp_path / "copy" / "train.parquet", (1, 1))
    prints = {
        corpus_fingerprint(f"hf:{tmp_path / name}::train", "en", "de")
        for name in ("parquet", "disk", "columns", "copy")
    }
    assert len(prints) == 1  # the same sentences, however they are stored
    edited = datasets.Dataset.from_dict({"en": en[:-1] + ["changed"], "de": de})
    edited.save_to_disk(str(tmp_path / "edited"))
    assert corpus_fingerprint(f"hf:{tmp_path / 'edited'}::train", "en", "de") not in prints
    assert corpus_fingerprint(f"hf:{tmp_path / 'disk'}::train", "de", "en") not in prints


def test_local_folders_resolve_like_local_files_and_errors_name_them(
    hub_offline, multi30k, tmp_path, monkeypatch
):
    en, de = multi30k
    splits = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"en": en, "de": de})})
    splits.save_to_disk(str(tmp_path / "data" / "mine"))
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    assert read_parallel("hf:mine::train", "en", "de").src == en  # like PREFIX files
    with pytest.raises(ValueError, match=r"no split 'training'; it has train") as info:
        read_parallel("hf:mine::training", "en", "de")
    assert "network" not in str(info.value)
    with pytest.raises(ValueError, match=r"local dataset '/nope'.*hf:FOLDER::SPLIT") as info:
        read_parallel("hf:/nope::train", "en", "de")
    assert ".." not in str(info.value)
