"""The SentencePiece model(s) of a run directory: reused while the data settings match, else
trained again (section 5.1 of the paper: one shared source-target vocabulary).

A run keeps its vocabulary next to its checkpoints: `spm.model` (one joint model for both
sides) or `spm.src.model` + `spm.tgt.model` when `data.shared_vocab` is false, and `spm.json`,
the settings it was trained with (the training corpus's fingerprint and every `data.*` key
the model depends on). A later job in the same directory (a resumed run, another process of a
distributed run, evaluation) loads the model while those settings are unchanged, and trains a
new one when one of them changed (another `data.train`, `data.vocab_size`, ...), saying which.
A checkpoint keeps the model it was trained with, so resuming with a new one is refused there.

A BPE model is trained on the corpus's word counts (`Tokenizer.train_from_word_counts`,
`transformer.data.encoding.collect_words`); a unigram model on its sentences.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path

from transformer.atomic import atomic_write_text
from transformer.data.config import DataConfig
from transformer.data.corpus import resolve_prefix
from transformer.data.encoding import CollectedWords
from transformer.data.hf_corpus import HF_PREFIX, local_folder
from transformer.data.tokenizer import Tokenizer
from transformer.data.word_encoding import word_counts

SETTINGS_FILE = "spm.json"
_KEYS = ("vocab_size", "spm_model_type", "spm_input_sentence_size", "spm_character_coverage")


def model_paths(output_dir: Path, shared: bool) -> list[Path]:
    """The SentencePiece model file(s) of a run directory (source first when not shared)."""
    if shared:
        return [output_dir / "spm.model"]
    return [output_dir / "spm.src.model", output_dir / "spm.tgt.model"]


def model_settings(config: DataConfig, fingerprint: str) -> dict:
    """What a run's model depends on: the training corpus's content (its fingerprint, in the
    direction of `config`), the languages, sharing, and the `data.spm_*` / `vocab_size` keys.
    `train` (the corpus as resolved) is recorded for people; the content decides."""
    return {
        "train": resolved_spec(config.train),
        "fingerprint": fingerprint,
        "languages": [config.source_lang, config.target_lang],
        "shared_vocab": config.shared_vocab,
        **{key: getattr(config, key) for key in _KEYS},
    }


def _changes(saved: dict, wanted: dict, reversed_fingerprint: Callable[[], str]) -> list[str]:
    """The settings that differ (a joint model serves both directions of the same corpus)."""
    ignored = ("train", "fingerprint", "languages", "model")
    changed = [
        f"{k} {saved.get(k)!r} -> {wanted[k]!r}"
        for k in wanted
        if k not in ignored and saved.get(k) != wanted[k]
    ]
    same_direction = saved.get("languages") == wanted["languages"]
    if same_direction:
        if saved.get("fingerprint") != wanted["fingerprint"]:
            changed.append("the training corpus's content")
    elif not wanted["shared_vocab"] or saved.get("languages") != wanted["languages"][::-1]:
        changed.append("languages")
    elif saved.get("fingerprint") != reversed_fingerprint():
        changed.append("the training corpus's content")
    return changed


def saved_tokenizer(
    config: DataConfig,
    output_dir: Path,
    settings: dict | None,
    reversed_fingerprint: Callable[[], str],
    log: Callable[[str], None],
) -> Tokenizer | None:
    """The run directory's model when it was trained with `settings`, else None.

    Args:
        config: The `data:` section.
        output_dir: The run directory.
        settings: `model_settings` of this job; None loads the model whatever it was
            trained with (evaluation, which has no training corpus to compare).
        reversed_fingerprint: The corpus fingerprint in the other direction (computed only
            when the saved model was trained for it).
        log: Receives one line saying what was reused or why it was not.

    Raises:
        ValueError: with `settings=None`, a model whose size differs from `data.vocab_size`.
    """
    paths = model_paths(output_dir, config.shared_vocab)
    if not all(path.is_file() for path in paths):
        return None
    tokenizer = Tokenizer.from_file(*paths)
    sizes = {tokenizer.src_vocab_size, tokenizer.tgt_vocab_size}
    saved_path = output_dir / SETTINGS_FILE
    if settings is None:
        if sizes != {config.vocab_size}:
            raise ValueError(
                f"{paths[0]} has vocabulary size {sorted(sizes)} but data.vocab_size is "
                f"{config.vocab_size}; delete the model or use another output directory"
            )
        return tokenizer
    if saved_path.is_file():
        try:
            saved = json.loads(saved_path.read_text(encoding="utf-8"))
        except ValueError:
            saved = None
        if not isinstance(saved, dict):  # damaged: nothing it says can be trusted
            saved = {}
        changed = _changes(saved, settings, reversed_fingerprint)
        if saved.get("model") != _digest(tokenizer):  # spm.json written for another model
            changed.append("the model file")
    else:  # a run directory from before spm.json: only the size can be compared
        changed = [] if sizes == {config.vocab_size} else ["vocab_size"]
    if changed:
        settings_text = "; ".join(changed)
        log(f"{paths[0]} was trained with other settings ({settings_text}): a new one is needed")
        return None
    log(f"reusing SentencePiece model {', '.join(map(str, paths))}")
    return tokenizer


def train_tokenizer(
    config: DataConfig,
    output_dir: Path,
    settings: dict,
    name: str,
    collected: CollectedWords | None = None,
    sentences: Callable[[int], Iterable[str]] | None = None,
) -> Tokenizer:
    """Train the run's model(s) and save them with their `spm.json`.

    Args:
        config: The `data:` section.
        output_dir: The run directory.
        settings: `model_settings` of this job (saved as `spm.json`).
        name: The training corpus, for messages.
        collected: Word counts per side (BPE).
        sentences: `sentences(side)` iterates one side's sentences, 0 = source, 1 = target
            (unigram).

    Raises:
        ValueError: no non-empty sentence to learn from, or SentencePiece refusing
            `data.vocab_size` (too small for the text's characters, or too large for it).
    """
    options = dict(
        vocab_size=config.vocab_size,
        model_type=config.spm_model_type,
        character_coverage=config.spm_character_coverage,
    )
    if collected is not None and not all(map(_has_words, collected.tables, collected.counts)):
        raise ValueError(
            f"training data {name!r} has no non-empty sentence pairs ({collected.pairs} lines); "
            "nothing to train SentencePiece on"
        )
    sides = [[0, 1]] if config.shared_vocab else [[0], [1]]
    models = []
    for group in sides:
        if collected is not None:
            counts = word_counts([(collected.tables[i], collected.counts[i]) for i in group])
            if not counts:
                raise ValueError(f"training data {name!r} has no words to train SentencePiece on")
            train = Tokenizer.train_from_word_counts
            models.append(_fit(train, counts, options, config, name))
        else:
            text = (s for i in group for s in sentences(i))
            options_sentences = {**options, "input_sentence_size": config.spm_input_sentence_size}
            models.append(_fit(Tokenizer.train, text, options_sentences, config, name))
    tokenizer = Tokenizer(*models)
    tokenizer.save(output_dir)
    saved = {**settings, "model": _digest(tokenizer)}  # ties spm.json to these model bytes
    atomic_write_text(output_dir / SETTINGS_FILE, json.dumps(saved, indent=1) + "\n")
    return tokenizer


def _digest(tokenizer: Tokenizer) -> str:
    """A hash of the model bytes (source and target)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(tokenizer.src_model_bytes)
    digest.update(tokenizer.tgt_model_bytes)
    return digest.hexdigest()


def resolved_spec(spec: str) -> str:
    """A corpus spec with its local path made absolute (a local prefix, or the folder of an
    `hf:` local dataset), so that it means the same from any working directory."""
    if not spec.startswith(HF_PREFIX):
        return str(resolve_prefix(spec).absolute())
    name, _, rest = spec[len(HF_PREFIX) :].partition(":")
    folder = local_folder(name)
    return f"{HF_PREFIX}{folder}:{rest}" if folder is not None else spec


def _has_words(table, counts) -> bool:
    """Whether a side has a word that is not blank (every sentence counted at least once)."""
    return any(
        word.strip() for word, count in zip(table.words(), counts.tolist(), strict=True) if count
    )


def _fit(train, data, options: dict, config: DataConfig, name: str) -> bytes:
    """`train(data, **options)` with the one-line error of a vocabulary that does not fit."""
    try:
        return train(data, **options)
    except ValueError as error:
        text = str(error).strip()
        if "ocabulary size" in text:
            raise ValueError(
                f"data.vocab_size ({config.vocab_size}) does not fit the training text "
                f"{name!r}: {text}"
            ) from error
        raise ValueError(f"SentencePiece could not be trained on {name!r}: {text}") from error
