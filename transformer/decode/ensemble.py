"""Ensembles: several models with one vocabulary decode together, averaging probabilities.

At every step the ensemble's next-token distribution is the mean of its members'
distributions, p(y | prefix, X) = (1/M) sum_m p_m(y | prefix, X), computed in log space as
logsumexp_m log p_m - log M; each member keeps its own encoder output and decoder cache. An
ensemble scores a given pair with the same averaged distribution at every target position
(`transformer.decode.scoring`). An ensemble of one model is that model: its log-probabilities
are used as they are.

Members must share the vocabulary: the same SentencePiece model(s) and the same vocabulary
sizes and special ids (`check_vocabularies`, `load_ensemble`).

Source: averaging the members' probabilities at each step as in fairseq's `EnsembleModel`
(Ott et al., 2019); ensembles of independently trained models in Sutskever et al. (2014).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import torch

# The fields of `ModelConfig` that define a vocabulary: members must agree on all of them.
VOCABULARY_FIELDS = (
    "vocab_size",
    "target_vocab_size",
    "pad_id",
    "unk_id",
    "bos_id",
    "eos_id",
)


def as_models(model: torch.nn.Module | Sequence[torch.nn.Module]) -> list[torch.nn.Module]:
    """A model, or a list or tuple of models (an ensemble), as a list of models."""
    if isinstance(model, (list, tuple)):
        return list(model)
    return [model]


def mean_probability(log_probs: Sequence[torch.Tensor]) -> torch.Tensor:
    """log((1/M) sum_m exp(log_probs[m])): the log of the members' mean probability.

    Args:
        log_probs: One tensor of log-probabilities per member, all of the same shape.

    Returns:
        The ensemble's log-probabilities; `log_probs[0]` itself for one member.

    Shape:
        each log_probs[m]: (..., V). output: (..., V).
    """
    if len(log_probs) == 1:
        return log_probs[0]
    stacked = torch.stack(list(log_probs))  # M x (..., V) -> (M, ..., V)
    return torch.logsumexp(stacked, dim=0) - math.log(len(log_probs))  # -> (..., V)


def check_vocabularies(models: Sequence[torch.nn.Module], names: Sequence[str] | None = None):
    """Refuse an ensemble whose members do not share one vocabulary.

    Args:
        models: The members (each with a `config`, a `ModelConfig`).
        names: How to name each member in the message (default: "model 0", "model 1", ...).

    Raises:
        ValueError: for an empty list, or one line naming the first member that differs from
            the first one and the setting that differs.
    """
    if not models:
        raise ValueError("an ensemble needs at least one model")
    names = list(names) if names is not None else [f"model {i}" for i in range(len(models))]
    first = models[0].config
    for name, model in zip(names[1:], models[1:], strict=True):
        for field in VOCABULARY_FIELDS:
            mine, theirs = getattr(first, field), getattr(model.config, field)
            if mine != theirs:
                raise ValueError(
                    f"{name} does not share the vocabulary of {names[0]}: "
                    f"{field} is {theirs}, not {mine}"
                )


def load_ensemble(paths: Sequence[str | Path], device: str | torch.device = "cpu"):
    """Load checkpoints that decode together (`Translator.from_checkpoints`).

    Args:
        paths: One or more checkpoint files (see `transformer.checkpoint.load_checkpoint`).
        device: Where the models go.

    Returns:
        (models, tokenizer, config): the models in the order given; the tokenizer and the
        full config (its `decode` section is the ensemble's default) of the first checkpoint.

    Raises:
        FileNotFoundError, ValueError: a missing or invalid checkpoint, naming it; ValueError
            also for an empty list, or a checkpoint whose vocabulary (SentencePiece models,
            sizes, special ids) or direction (data.source_lang, data.target_lang) differs
            from the first one's, naming both files; and for one file given twice (the same
            name, or a link such as a run's `checkpoint_last.pt`, a hard link of its newest
            numbered checkpoint): an ensemble of a model with itself is that model, slower.
    """
    from transformer.checkpoint import load_checkpoint
    from transformer.train.average import distinct_files

    if not paths:
        raise ValueError("an ensemble needs at least one checkpoint")
    _, repeats = distinct_files([path for path in paths if Path(path).is_file()])
    if repeats:
        repeat, first = repeats[0]
        raise ValueError(
            f"{repeat} is the same file as {first}: an ensemble's members must be different "
            "checkpoints"
        )
    models, names = [], [str(path) for path in paths]
    tokenizer = config = None
    for name, path in zip(names, paths, strict=True):
        model, its_tokenizer, its_config = load_checkpoint(path, device=device)
        if tokenizer is None:
            tokenizer, config = its_tokenizer, its_config
        elif (its_tokenizer.src_model_bytes, its_tokenizer.tgt_model_bytes) != (
            tokenizer.src_model_bytes,
            tokenizer.tgt_model_bytes,
        ):
            raise ValueError(
                f"{name} does not share the vocabulary of {names[0]}: "
                "their SentencePiece models differ"
            )
        pair = (its_config.data.source_lang, its_config.data.target_lang)
        first_pair = (config.data.source_lang, config.data.target_lang)
        if pair != first_pair:
            raise ValueError(
                f"{name} translates {'->'.join(pair)}, not {'->'.join(first_pair)} as "
                f"{names[0]} does: an ensemble's members translate one way"
            )
        models.append(model)
    check_vocabularies(models, names)
    return models, tokenizer, config
