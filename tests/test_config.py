"""Tests for transformer/config.py: YAML + dotted overrides onto the dataclasses, with errors
naming the key (each section's own checks: tests/<section>/test_config.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from transformer.config import config_from_dict, config_to_dict, load_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    config = load_config(path)
    assert config_from_dict(config_to_dict(config)) == config  # and round-trips


def test_tiny_config_is_small():
    config = load_config(CONFIGS / "tiny.yaml")
    assert config.model.d_model == 64
    assert config.model.n_encoder_layers == config.model.n_decoder_layers == 2


@pytest.mark.parametrize("name", ["base", "big"])
def test_the_paper_configs_checkpoint_by_time_and_hold_25000_tokens_on_any_gpu_count(name):
    """Section 6.1: checkpoints at 10-minute intervals (averaging the last 5 / 20 averages the
    same stretch of training however fast the GPUs), ~25000 tokens per side per update."""
    config = load_config(CONFIGS / f"{name}.yaml")
    train = config.train
    assert not train.save_interval_steps and train.save_interval_minutes == 10
    for gpus in range(1, 9):
        plan = train.batch_plan(gpus, longest=config.data.max_len + 1)
        assert 25000 <= plan.tokens_per_update <= 1.1 * 25000, (gpus, plan)


def test_overrides_are_parsed_as_yaml_and_type_checked():
    config = config_from_dict(
        {"train": {"max_steps": 5}},
        [
            "train.max_steps=1000",
            "model.dropout=0.3",
            "train.adam_eps=1e-8",
            "data.valid=null",
            "train.adam_betas=[0.9, 0.997]",
        ],
    )
    assert config.train.max_steps == 1000 and config.model.dropout == 0.3
    assert config.train.adam_eps == 1e-8  # YAML 1.1 reads 1e-8 as a string; accepted as float
    assert config.data.valid is None
    assert config.train.adam_betas == (0.9, 0.997)


@pytest.mark.parametrize("spelled", ["inf", "Infinity", "+INF", ".inf"])
def test_infinity_is_read_from_yaml_and_overrides_however_spelled(tmp_path, spelled):
    path = tmp_path / "inf.yaml"
    path.write_text(f"train:\n  max_minutes: {spelled}\n")
    assert load_config(path).train.max_minutes == math.inf
    overridden = config_from_dict({}, [f"train.max_minutes={spelled}"])
    assert overridden.train.max_minutes == math.inf


def test_nan_spelled_out_is_still_refused_for_a_number():
    with pytest.raises(ValueError, match="train.max_minutes.*'nan'"):
        config_from_dict({}, ["train.max_minutes=nan"])


def test_unknown_key_lists_the_valid_keys_of_its_section():
    with pytest.raises(ValueError) as error:
        config_from_dict({"train": {"max_stepz": 3}})
    message = str(error.value)
    assert "train.max_stepz" in message
    for key in ("max_steps", "warmup_steps", "label_smoothing"):
        assert key in message
    with pytest.raises(ValueError, match="valid sections"):
        config_from_dict({"trian": {}})


@pytest.mark.parametrize(
    "override, key",
    [
        ("train.max_steps=many", "train.max_steps"),
        ("train.compile=3", "train.compile"),
        ("model.d_model=5.5", "model.d_model"),
        ("train.adam_betas=0.9", "train.adam_betas"),
    ],
)
def test_wrong_type_names_the_key(override, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        config_from_dict({}, [override])


@pytest.mark.parametrize(
    "override, expected",
    [
        ("train.lr_scale=abc", "expected float, got 'abc' (str)"),
        ("train.clip_norm=abc", "expected float or null, got 'abc' (str)"),
        ("train.num_threads=two", "expected int or null, got 'two' (str)"),
        ("model.d_model=5.5", "expected int, got 5.5 (float)"),
    ],
)
def test_a_wrong_type_is_worded_alike_with_or_without_null(override, expected):
    with pytest.raises(ValueError) as error:
        config_from_dict({}, [override])
    assert str(error.value).endswith(f"config key {override.split('=')[0]}: {expected}")


def test_yaml_round_trip(tmp_path):
    config = config_from_dict({}, ["train.max_steps=7", "model.d_model=64", "model.n_heads=4"])
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config_to_dict(config)))
    assert load_config(path) == config


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [unclosed")
    with pytest.raises(ValueError, match="bad.yaml"):
        load_config(bad)


def test_section_that_is_not_a_mapping_names_file_and_section(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model: 5\n")
    with pytest.raises(ValueError, match=r"c\.yaml: config section 'model' must be a mapping"):
        load_config(path)


def test_non_utf8_config_message_starts_with_the_file_name(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("train:\n  output_dir: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError) as error:
        load_config(path)
    assert str(error.value).startswith(f"{path}: not a UTF-8 text file")


def test_override_errors_blame_the_override_not_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  max_steps: 10\n")
    for override in ("train.nope=1", "train.max_steps=many", "train.max_steps=0"):
        with pytest.raises(ValueError) as error:
            load_config(path, [override])
        assert f"command-line override '{override}'" in str(error.value)
    with pytest.raises(ValueError) as error:
        load_config(path, ["nope.x=1"])
    assert str(error.value).startswith("command-line override 'nope.x=1'")
    path.write_text("train:\n  nope: 1\n")
    with pytest.raises(ValueError) as error:
        load_config(path, ["train.max_steps=5"])
    assert str(error.value).startswith(f"{path}: unknown config key train.nope")


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ("train.max_steps=[1", "expected ',' or ']', but got '<stream end>' (line 1, column 3)"),
        ("train.max_steps=@x", "found character '@' that cannot start any token"),
    ],
)
def test_an_override_that_is_not_yaml_names_the_override(override, problem):
    with pytest.raises(ValueError) as error:
        config_from_dict({}, [override])
    message = str(error.value)
    assert message.startswith(f"command-line override '{override}': the value is not valid YAML")
    assert problem in message and "\n" not in message


@pytest.mark.parametrize("override", ["data.cache_dir=~", "train.max_steps= ~ "])
def test_a_bare_tilde_override_is_refused_not_read_as_null(override):
    # YAML reads a bare ~ as null: data.cache_dir=~ would silently mean <output_dir>/cache.
    assert yaml.safe_load(override.split("=", 1)[1]) is None
    with pytest.raises(ValueError) as error:
        config_from_dict({}, [override])
    message = str(error.value)
    assert message.startswith(f"command-line override '{override}': a bare ~ is YAML's null")
    # null means each key's own thing (a default folder, no limit): the line does not guess
    dotted = override.split("=", 1)[0]
    assert f"write {dotted}=null where null is meant" in message and "\n" not in message


def test_a_folder_under_home_and_null_still_work_as_overrides():
    config = config_from_dict({}, ["data.cache_dir=~/encoded"])
    assert config.data.cache_dir == "~/encoded"
    assert config_from_dict({}, ["data.cache_dir=null"]).data.cache_dir is None


def test_bad_yaml_is_named_in_one_line_with_its_place(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  max_steps: [1\n")
    with pytest.raises(ValueError) as error:
        load_config(bad)
    assert str(error.value) == (
        f"{bad}: invalid YAML: expected ',' or ']', but got '<stream end>' (line 3, column 1)"
    )


def test_a_missing_config_or_a_directory_is_named_as_such(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^config file not found: .*nope\.yaml$"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(FileNotFoundError, match=r"is a directory, not a YAML file$"):
        load_config(tmp_path)
    # /dev/null exists: it was "config file not found: /dev/null".
    with pytest.raises(FileNotFoundError, match=r"^config /dev/null is not a regular file"):
        load_config("/dev/null")


@pytest.mark.parametrize(
    "text, key, line",
    [
        ("model:\n  d_model: 32\nmodel:\n  d_ff: 64\n", "model", 3),  # the first section lost
        ("model: {d_model: 32, d_model: 64}\n", "d_model", 1),
        ("train:\n  seed: 1\n  max_steps: 5\n  seed: 2\n", "seed", 4),
    ],
)
def test_a_key_given_twice_is_an_error_naming_it_and_its_line(tmp_path, text, key, line):
    """PyYAML keeps the last of two equal keys: a whole `model:` section was dropped without a
    word (#17, bad-input pass). yaml.safe_load is the reference for what is otherwise read."""
    path = tmp_path / "dup.yaml"
    path.write_text(text, encoding="utf-8")
    assert yaml.safe_load(text)  # PyYAML itself accepts it
    with pytest.raises(
        ValueError, match=rf"dup\.yaml: invalid YAML: '{key}' given twice \(line {line},"
    ):
        load_config(path)
    unique = tmp_path / "unique.yaml"
    unique.write_text("model:\n  d_model: 32\n  d_ff: 64\ntrain: {seed: 3}\n", encoding="utf-8")
    config = load_config(unique)
    assert (config.model.d_model, config.model.d_ff, config.train.seed) == (32, 64, 3)


@pytest.mark.parametrize(
    "file_text, overrides, blamed",
    [
        # The file's value is out of range; the overrides set other keys of the section.
        ("model:\n  d_model: -64\n", ["model.dropout=0.1", "train.max_steps=5"], []),
        ("model:\n  dropout: 3\n", ["model.n_heads=4"], []),
        # The override's own value.
        ("model:\n  dropout: 0.1\n", ["model.dropout=2", "model.n_heads=4"], [0]),
        # Two keys together: the file's d_model with the override's n_heads.
        ("model:\n  d_model: 64\n", ["model.n_heads=3", "model.dropout=0.1"], [0]),
    ],
)
def test_a_bad_value_is_blamed_on_where_it_came_from(tmp_path, file_text, overrides, blamed):
    """A bad value in the YAML file was blamed on unrelated command-line overrides
    (`c.yaml with command-line override 'model.dropout=0.1': d_model (-64) ...`, #17 item 3)."""
    path = tmp_path / "c.yaml"
    path.write_text(file_text)
    with pytest.raises(ValueError) as error:
        load_config(path, overrides)
    origin = str(error.value).split(": ", 1)[0]
    expected = " with ".join(
        [str(path)] + [f"command-line override {overrides[i]!r}" for i in blamed]
    )
    assert origin == expected


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_override_is_the_blank_string_not_null(blank):
    """YAML reads `data.cache_dir=  ` as null, so it silently meant the default folder, where
    `data.cache_dir=` was refused (#17, bad-input pass)."""
    with pytest.raises(ValueError, match=rf"data\.cache_dir \('{blank}'\) is blank"):
        config_from_dict({}, [f"data.cache_dir={blank}"])


def test_a_special_id_beyond_the_vocabulary_is_named_before_data_preparation():
    """model.pad_id=5000 with data.vocab_size=300 was refused only after the data was
    prepared, as "pad_id (5000) must be in [0, 300)" (#17, bad-input pass)."""
    with pytest.raises(ValueError) as error:
        config_from_dict({"data": {"vocab_size": 300}}, ["model.pad_id=5000"])
    assert str(error.value) == (
        "command-line override 'model.pad_id=5000': model.pad_id (5000) must be below "
        "data.vocab_size (300)"
    )
    assert config_from_dict({"data": {"vocab_size": 300}}, ["model.pad_id=299"])
