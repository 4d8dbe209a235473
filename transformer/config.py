"""The whole experiment's config: one typed section per concern, read from YAML and written back.

`Config` gathers the four sections, each defined next to the code it configures:
`model` (`transformer.model.config.ModelConfig`), `data` (`transformer.data.config.DataConfig`),
`train` (`transformer.train.config.TrainConfig`) and `decode`
(`transformer.decode.config.DecodeConfig`). Each is a frozen dataclass whose defaults are the
paper's base model and recipe and whose `__post_init__` rejects out-of-range values by name: the
one place where a user's settings are checked.

`load_config` reads `configs/*.yaml`; `config_from_dict` also rebuilds a checkpoint's config;
`config_to_dict` writes one. Every key is checked against its section's field and type
(torchtune-style): an unknown key lists its section's valid keys, a wrong type names the key.

Example:
    >>> from transformer.config import load_config
    >>> config = load_config("configs/tiny.yaml", ["train.max_steps=1000"])
    >>> config.train.max_steps
    1000
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from transformer.config_values import coerce
from transformer.data.config import DataConfig
from transformer.decode.config import DecodeConfig
from transformer.model.config import ModelConfig
from transformer.train.config import TrainConfig, without_unused_lr_knob

__all__ = ["Config", "DataConfig", "DecodeConfig", "ModelConfig", "TrainConfig", "load_config"]


@dataclass(frozen=True)
class Config:
    """A whole experiment: one dataclass per YAML section."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


# Keys that older versions accepted, with where they went. A checkpoint that stores one still
# loads (the key is dropped); a config file or override that uses one is told where it went.
RETIRED_KEYS = {"model": {"linear_kernel": "train.linear_kernel"}}


def _build_section(cls: type, values: dict, section: str, origins: dict[str, str]) -> object:
    """Build one section's dataclass from a dict, rejecting unknown keys and wrong types.

    `origins` maps a key to where its value came from (the file, or a command-line override);
    a key missing from it came from `origins[""]`, the file.
    """
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in values.items():
        origin = origins.get(key, origins[""])
        if key in RETIRED_KEYS.get(section, {}):
            raise ValueError(
                f"{origin}: config key {section}.{key} is now {RETIRED_KEYS[section][key]} "
                "(a runtime choice of how to compute, no longer part of the model)"
            )
        if key not in names:
            raise ValueError(
                f"{origin}: unknown config key {section}.{key}; valid keys of {section!r}: "
                + ", ".join(names)
            )
        try:
            kwargs[key] = coerce(value, hints[key], f"{section}.{key}")
        except ValueError as error:
            raise ValueError(f"{origin}: {error}") from error
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{_blame(str(error), values, origins)}: {error}") from error


def _blame(message: str, values: dict, origins: dict[str, str]) -> str:
    """Where a bad value came from: the file, with the overrides of the keys `message` names."""
    named = [key for key in values if re.search(rf"\b{re.escape(key)}\b", message)]
    overridden = [key for key in values if key in origins]
    blamed = {origins[key] for key in (named or overridden) if key in overridden}
    return " with ".join([origins[""], *sorted(blamed)])


def _yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML error in one line: what is wrong and where (PyYAML's own text spans several)."""
    problem = getattr(error, "problem", None)
    mark = getattr(error, "problem_mark", None)
    if problem is None:
        return " ".join(str(error).split())
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{problem}{where}"


def _parse_override(text: str) -> tuple[str, str, object]:
    """Split `section.key=value` into its parts, parsing the value as YAML.

    Raises:
        ValueError: naming the override, for one without `section.key=`, whose value is not
            valid YAML (`train.max_steps=[1`), or is a bare `~`: YAML's null, which a user
            who types `data.cache_dir=~` (the shell leaves it as it is) does not mean.
    """
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise ValueError(f"command-line override {text!r} must look like section.key=value")
    dotted, raw = text.split("=", 1)
    section, key = dotted.split(".", 1)
    if raw.strip() == "~":
        raise ValueError(
            f"command-line override {text!r}: a bare ~ is YAML's null, not the home folder: "
            f"write {dotted}=null where null is meant, or a folder such as {dotted}=~/name"
        )
    try:
        value = yaml.safe_load(raw) if raw.strip() else raw  # YAML reads blanks as null
    except yaml.YAMLError as error:
        raise ValueError(
            f"command-line override {text!r}: the value is not valid YAML: {_yaml_problem(error)}"
        ) from None
    return section, key, value


def config_from_dict(
    raw: dict,
    overrides: list[str] | None = None,
    source: str = "config",
    drop_retired: bool = False,
) -> Config:
    """Build a `Config` from a plain dict (as read from YAML) plus dotted overrides.

    Args:
        raw: Mapping of section name to a mapping of keys.
        overrides: Strings such as `train.max_steps=1000`; values are parsed as YAML.
        source: Where `raw` came from, for error messages.
        drop_retired: Silently drop `RETIRED_KEYS` (for configs stored in older checkpoints).

    Returns:
        The checked `Config`.

    Raises:
        ValueError: an unknown section or key (listing the valid ones), a wrong type, or an
            invalid value, naming the key.
    """
    raw = dict(raw or {})
    sections = {f.name: f.type for f in dataclasses.fields(Config)}
    hints = typing.get_type_hints(Config)
    for name, values in raw.items():
        if name not in sections:
            raise ValueError(
                f"{source}: unknown config section {name!r}; valid sections: " + ", ".join(sections)
            )
        if values is not None and not isinstance(values, dict):
            raise ValueError(
                f"{source}: config section {name!r} must be a mapping of keys, got {values!r}"
            )
    merged = {name: dict(raw.get(name) or {}) for name in sections}
    if drop_retired:  # and the other lr schedule's knob, which the stored run ignored
        for name, retired in RETIRED_KEYS.items():
            for key in retired:
                merged[name].pop(key, None)
        merged["train"] = without_unused_lr_knob(merged["train"])
    origins: dict[str, dict[str, str]] = {name: {"": source} for name in sections}
    for text in overrides or []:
        section, key, value = _parse_override(text)
        if section not in sections:
            raise ValueError(
                f"command-line override {text!r}: unknown section {section!r}; valid sections: "
                + ", ".join(sections)
            )
        merged[section][key] = value
        origins[section][key] = f"command-line override {text!r}"
    built = {
        name: _build_section(hints[name], merged[name], name, origins[name]) for name in sections
    }
    model, vocab_size = built["model"], built["data"].vocab_size
    for key in ("pad_id", "unk_id", "bos_id", "eos_id"):  # checked before data preparation
        if getattr(model, key) >= vocab_size:  # (the trained vocabulary sets model.vocab_size)
            raise ValueError(
                f"{origins['model'].get(key, source)}: model.{key} ({getattr(model, key)}) "
                f"must be below data.vocab_size ({vocab_size})"
            )
    return Config(**built)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (it keeps the last)."""

    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(key, deep=True) for key, _ in node.value]
        for i, key in enumerate(keys):
            if isinstance(key, (str, int, float, bool)) and key in keys[:i]:
                mark = node.value[i][0].start_mark
                raise yaml.constructor.ConstructorError(None, None, f"{key!r} given twice", mark)
        return super().construct_mapping(node, deep)


def _read_yaml(path: Path) -> dict:
    """The top-level mapping of a YAML config file."""
    if path.is_dir():
        raise FileNotFoundError(f"config {path} is a directory, not a YAML file")
    if path.exists() and not path.is_file():  # /dev/null, a pipe: "not found" was untrue
        raise FileNotFoundError(f"config {path} is not a regular file: give a YAML file")
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), _UniqueKeyLoader) or {}
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not a UTF-8 text file ({error.reason})") from error
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: invalid YAML: {_yaml_problem(error)}") from error
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: top level must be a mapping of sections")
    return raw


def load_config(path: str | Path, overrides: list[str] | None = None) -> Config:
    """Read a YAML config file and apply dotted overrides (see `config_from_dict`).

    Raises:
        FileNotFoundError: when `path` does not exist.
        ValueError: on YAML syntax errors or invalid keys/values, naming the file.
    """
    return config_from_dict(_read_yaml(Path(path)), overrides, source=str(path))


def default_keys(path: str | Path, overrides: list[str] | None = None) -> list[str]:
    """The `section.key` names that neither the file nor an override sets (call after
    `load_config` has accepted both): what a run takes from the dataclasses' defaults.

    Raises:
        FileNotFoundError, ValueError: as `load_config`.
    """
    raw = _read_yaml(Path(path))
    given = {(name, key) for name, values in raw.items() for key in (values or {})}
    given |= {_parse_override(text)[:2] for text in overrides or []}
    sections = typing.get_type_hints(Config)
    return [
        f"{section}.{key.name}"
        for section, cls in sections.items()
        for key in dataclasses.fields(cls)
        if (section, key.name) not in given
    ]


def format_config(config: Config, defaults: list[str] = (), notes: dict | None = None) -> str:
    """The config as YAML (what `load_config` reads back), `# default` after the keys in
    `defaults`, and `# NOTE` after the keys of `notes` ({"section.key": NOTE}; it wins)."""
    lines, notes = [], notes or {}
    for section, values in config_to_dict(config).items():
        lines.append(f"{section}:")
        for key, value in values.items():
            text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...")
            name = f"{section}.{key}"
            mark = "  # default" if name in defaults else ""
            mark = f"  # {notes[name]}" if name in notes else mark
            lines.append(f"  {key}: {text.strip()}{mark}")
    return "\n".join(lines) + "\n"


def config_to_dict(config: Config) -> dict:
    """The config as plain Python values (tuples as lists), ready for YAML or a checkpoint."""

    def plain(value: object) -> object:
        return [plain(v) for v in value] if isinstance(value, tuple) else value

    return {
        name: {k: plain(v) for k, v in dataclasses.asdict(getattr(config, name)).items()}
        for name in ("model", "data", "train", "decode")
    }
