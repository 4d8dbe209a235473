"""The SentencePiece model(s) of a run directory: reused when present, else trained and saved.

A run keeps its vocabulary next to its checkpoints: `spm.model` (one joint model for both
sides, as in section 5.1 of the paper) or `spm.src.model` + `spm.tgt.model` when
`data.shared_vocab` is false. A second job in the same directory (a resumed run, another
process of a distributed run, evaluation) loads these files rather than training again.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path

from transformer.data.config import DataConfig
from transformer.data.corpus import ParallelText
from transformer.data.tokenizer import Tokenizer


def model_paths(output_dir: Path, shared: bool) -> list[Path]:
    """The SentencePiece model file(s) of a run directory (source first when not shared)."""
    if shared:
        return [output_dir / "spm.model"]
    return [output_dir / "spm.src.model", output_dir / "spm.tgt.model"]


def load_or_train_tokenizer(
    config: DataConfig,
    output_dir: Path,
    train_text: ParallelText | None,
    log: Callable[[str], None],
) -> Tokenizer:
    """Load the SentencePiece model(s) from `output_dir`, or train them on `train_text` and save.

    Args:
        config: The `data:` section (vocabulary size, model type, sharing, sampling).
        output_dir: The run directory.
        train_text: The training corpus; None when the model(s) must already exist.
        log: Receives one-line progress messages.

    Returns:
        The run's `Tokenizer`.

    Raises:
        FileNotFoundError: no model in `output_dir` and no `train_text` to train one on.
        ValueError: a saved model whose vocabulary size differs from `config.vocab_size`,
            training text without a single non-empty pair, or SentencePiece refusing
            `data.vocab_size` (too small for the text's characters, or too large for the text).
    """
    paths = model_paths(output_dir, config.shared_vocab)
    if all(path.is_file() for path in paths):
        tokenizer = Tokenizer.from_file(*paths)
        sizes = {tokenizer.src_vocab_size, tokenizer.tgt_vocab_size}
        if sizes != {config.vocab_size}:
            raise ValueError(
                f"{paths[0]} has vocabulary size {sorted(sizes)} but data.vocab_size is "
                f"{config.vocab_size}; delete the model or use another output directory"
            )
        log(f"reusing SentencePiece model {', '.join(map(str, paths))}")
        return tokenizer
    if train_text is None:
        raise FileNotFoundError(
            f"SentencePiece model not found: {paths[0]}; run prepare_data(train=True) "
            "(training) in this output directory first"
        )
    pairs = zip(train_text.src, train_text.tgt, strict=True)
    if not any(s.strip() and t.strip() for s, t in pairs):
        raise ValueError(
            f"training data {train_text.name!r} has no non-empty sentence pairs "
            f"({len(train_text)} lines); nothing to train SentencePiece on"
        )
    start = time.perf_counter()
    options = dict(
        vocab_size=config.vocab_size,
        model_type=config.spm_model_type,
        input_sentence_size=config.spm_input_sentence_size,
        character_coverage=config.spm_character_coverage,
    )
    try:
        if config.shared_vocab:
            tokenizer = Tokenizer(
                Tokenizer.train(itertools.chain(train_text.src, train_text.tgt), **options)
            )
        else:
            tokenizer = Tokenizer(
                Tokenizer.train(train_text.src, **options),
                Tokenizer.train(train_text.tgt, **options),
            )
    except ValueError as error:
        raise ValueError(
            f"data.vocab_size ({config.vocab_size}) does not fit the training text "
            f"{train_text.name!r}: {error}"
        ) from error
    saved = tokenizer.save(output_dir)
    log(
        f"trained SentencePiece {config.spm_model_type} model(s) with {config.vocab_size} pieces "
        f"in {time.perf_counter() - start:.1f} s -> {', '.join(map(str, saved))}"
    )
    return tokenizer
