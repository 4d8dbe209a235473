"""From raw parallel text to filtered, cached token ids: `prepare_data`.

Example:
    >>> from transformer.data.config import DataConfig
    >>> from transformer.data.prepare import prepare_data
    >>> from transformer.data.batching import BatchIterator
    >>> config = DataConfig(train="multi30k/train", valid="multi30k/val", vocab_size=8000)
    >>> prepared = prepare_data(config, "checkpoints/m30k")  # trains checkpoints/m30k/spm.model
    train: dropped 0 of 29000 pairs: 0 empty, 0 longer than 256 tokens
    ...
    >>> it = BatchIterator(prepared.train, max_tokens=4096, seed=1)
    >>> batch = next(iter(it.epoch(1)))
    >>> batch.src.shape, batch.tgt_in.shape  # (B, S), (B, T)

Steps (section 5.1 of the paper, with SentencePiece in place of the authors' BPE tool):
1. check that every corpus can be read (an unreachable dataset fails here, before any work);
2. reuse the run directory's SentencePiece model when its settings match, else count the
   training corpus's words (one pass, in chunks) and train one joint model on both sides
   (`transformer.data.vocabulary`);
3. encode every sentence once, chunk by chunk (`transformer.data.encoding`), into a cache
   entry of flat arrays keyed by the corpus and the model (`transformer.data.token_cache`);
4. drop empty pairs, pairs with a side longer than `max_len` tokens and optionally pairs whose
   length ratio exceeds `max_len_ratio`, counting every drop (`dataset.filter_pairs`); the
   kept rows are cached too, so that every process of a job opens the same memory-mapped
   files and none holds a copy of its own;
5. with `data.bpe_dropout`, draw BPE-dropout segmentations of every training word into the
   cache as well (`transformer.data.bpe_dropout`: the training pairs are segmented anew
   every epoch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from transformer.data.config import DataConfig
from transformer.data.corpus import corpus_fingerprint, read_parallel
from transformer.data.dataset import DropReport, ParallelDataset
from transformer.data.preparation import DataNotPrepared, Preparation
from transformer.data.stages import StageRecord
from transformer.data.tokenizer import Tokenizer
from transformer.data.vocabulary import model_paths, model_settings, saved_tokenizer


@dataclass
class PreparedData:
    """What `prepare_data` returns.

    Attributes:
        tokenizer: The SentencePiece tokenizer (saved in `output_dir`).
        train: Filtered training pairs, or None when `prepare_data(train=False)`.
        valid: Filtered validation pairs, or None when `config.valid` is empty.
        valid_src_text, valid_ref_text: All raw validation sentences (unfiltered, for BLEU).
        train_report, valid_report: Drop counts (None where there is no such split).
        stages: Time and peak memory of each stage that ran.
    """

    tokenizer: Tokenizer
    train: ParallelDataset | None
    valid: ParallelDataset | None
    valid_src_text: list[str]
    valid_ref_text: list[str]
    train_report: DropReport | None = None
    valid_report: DropReport | None = None
    stages: list[StageRecord] = field(default_factory=list)


def prepare_data(
    config: DataConfig,
    output_dir: str | Path,
    train: bool = True,
    log: Callable[[str], None] | None = print,
    build: bool = True,
    replace_model: bool = False,
) -> PreparedData:
    """Tokenizer plus filtered, encoded training and validation data (see module doc).

    Args:
        config: The `data:` section.
        output_dir: Run directory; holds the SentencePiece model(s) and, unless
            `config.cache_dir` is set, the `cache/` of encoded corpora.
        train: Also prepare the training split (and train the SentencePiece model when the
            run directory has none for these settings); False only loads the model and the
            validation split.
        log: Receives one-line progress, stage and drop reports; None silences them.
        build: False uses only what is already in `output_dir` (the SentencePiece model and
            the cached token ids) and raises `DataNotPrepared` when something is missing:
            how the other processes of a torchrun job load what rank 0 prepared.
        replace_model: Allow training a new SentencePiece model (the data settings changed)
            in a run directory that holds checkpoints of the old one (a fresh start: the
            checkpoints are set aside); otherwise that is an error, and nothing is replaced.

    Returns:
        `PreparedData` with `tokenizer`, `train`, `valid`, `valid_src_text`, `valid_ref_text`.

    Raises:
        FileNotFoundError: missing corpus file, or no model in `output_dir` with train=False.
        DataNotPrepared: with build=False, a model or cache entry that is not there (yet).
        FileExistsError: the settings changed in a run directory with checkpoints, without
            `replace_model`.
        ValueError: unreadable/misaligned corpus, an unreachable dataset, a model whose size
            differs from the config (train=False), a split empty after filtering, or a cache
            folder that cannot be made or written.
    """
    log = log or (lambda message: None)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    job = Preparation(config, output_dir, log, build)
    src, tgt = config.source_lang, config.target_lang
    # Every corpus is checked before anything is trained or encoded.
    fingerprint = corpus_fingerprint(config.train, src, tgt) if train else None
    valid_text = read_parallel(config.valid, src, tgt) if config.valid else None
    settings = model_settings(config, fingerprint) if train else None
    reverse = lambda: corpus_fingerprint(config.train, tgt, src)  # noqa: E731
    tokenizer = saved_tokenizer(config, output_dir, settings, reverse, log)
    if tokenizer is None:
        if not build:
            raise DataNotPrepared(f"no SentencePiece model in {output_dir} yet")
        if not train:
            missing = model_paths(output_dir, config.shared_vocab)[0]
            raise FileNotFoundError(
                f"SentencePiece model not found: {missing}; run prepare_data(train=True) "
                "(training) in this output directory first"
            )
        checkpoints = sorted(p.name for p in output_dir.glob("checkpoint_*.pt"))
        if (
            checkpoints
            and not replace_model
            and model_paths(output_dir, config.shared_vocab)[0].is_file()
        ):
            raise FileExistsError(
                f"{output_dir} holds checkpoints ({checkpoints[0]}, ...) trained with its "
                "SentencePiece model, which these data settings would replace (see the line "
                "above): nothing was replaced. Use another train.output_dir, or start this run "
                "over with transformer-train --no-resume (it sets the checkpoints aside)"
            )
    result = PreparedData(tokenizer, None, None, [], [], stages=job.stages.records)
    try:
        if tokenizer is None:
            tokenizer = result.tokenizer = job.train_vocabulary(settings)
        if train:
            result.train, result.train_report = job.split(
                "train", config.train, fingerprint, tokenizer
            )
            if config.bpe_dropout > 0:  # a segmentation per epoch (data/bpe_dropout.py)
                result.train = job.bpe_dropout(result.train, fingerprint, tokenizer)
        if valid_text is not None:
            result.valid_src_text, result.valid_ref_text = valid_text.src, valid_text.tgt
            result.valid, result.valid_report = job.split(
                "valid", config.valid, valid_text.fingerprint, tokenizer, valid_text
            )
    except OSError as error:
        if (unwritable := job.unwritable(error)) is None:
            raise
        raise unwritable from error
    finally:
        job.drop_scratch()
    return result
