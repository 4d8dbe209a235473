"""The `data:` section of a config: where parallel text comes from and how it is tokenized."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from transformer.data.tokenizer import SPM_MODEL_TYPES

# The smallest SentencePiece vocabulary: pad, unk, bos, eos and at least one character.
MIN_SPM_VOCAB = 5


@dataclass(frozen=True)
class DataConfig:
    """The `data:` section: where parallel text comes from and how it becomes batches.

    `train`, `valid` and `test` are either a local path prefix (`multi30k/train` reads
    `multi30k/train.en` and `multi30k/train.de`; relative paths are resolved against
    $TRANSFORMER_DATA_DIR when set, else the current directory) or a Hugging Face `datasets`
    spec `hf:NAME:CONFIG:SPLIT` (e.g. `hf:wmt/wmt14:de-en:train`; CONFIG may be empty). Swap
    `source_lang` and `target_lang` for the other direction. `valid`/`test` may be null.

    Args:
        vocab_size: SentencePiece pieces (special tokens included); per side when
            `shared_vocab` is false. The paper uses about 37000 shared BPE tokens for EN-DE.
        spm_model_type: "bpe" (the paper) or "unigram".
        spm_input_sentence_size: SentencePiece trains on at most this many sentences,
            sampled at random from both sides (for large corpora).
        spm_character_coverage: Fraction of characters the alphabet covers; rarer ones map
            to unk.
        shared_vocab: One joint model for both sides (section 5.1) or one per side.
        max_len: Pairs with a side longer than this many subword tokens (without bos/eos)
            are dropped from training and validation data.
        max_len_ratio: Also drop pairs where max(len) / min(len) exceeds this (a finite
            number >= 1); null = off.
        cache_dir: Where encoded corpora are cached (`~` expands to the home folder; a
            relative path is resolved against the current directory); null =
            `<output_dir>/cache` (`cache_directory`).
        bpe_dropout: BPE-dropout's probability of skipping a merge when the training corpus
            is segmented anew each epoch (Provilkov et al., 2020; 0.1 there); 0 = off (the
            paper). BPE models only (`data/bpe_dropout.py`).
    """

    source_lang: str = "en"
    target_lang: str = "de"
    train: str = "multi30k/train"
    valid: str | None = "multi30k/val"
    test: str | None = "multi30k/test_2016_flickr"
    vocab_size: int = 37000
    spm_model_type: str = "bpe"
    spm_input_sentence_size: int = 10_000_000
    spm_character_coverage: float = 0.9999
    shared_vocab: bool = True
    max_len: int = 256
    max_len_ratio: float | None = None
    cache_dir: str | None = None
    bpe_dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("source_lang", "target_lang"):
            if not getattr(self, name).strip():  # '' read corpus files named "train."
                raise ValueError(f"data.{name} is blank: give a language code such as en")
        # A blank train read TRANSFORMER_DATA_DIR.en; a blank valid or test is none, as null.
        if not self.train.strip():
            raise ValueError(
                f"data.train ({self.train!r}) is blank: give a corpus prefix such as "
                "multi30k/train or an hf:NAME:CONFIG:SPLIT spec"
            )
        if self.source_lang == self.target_lang:
            raise ValueError(f"source_lang and target_lang are both {self.source_lang!r}")
        if self.spm_model_type not in SPM_MODEL_TYPES:
            raise ValueError(
                f"spm_model_type ({self.spm_model_type!r}) must be one of "
                f"{', '.join(SPM_MODEL_TYPES)}"
            )
        if self.vocab_size < MIN_SPM_VOCAB:
            raise ValueError(
                f"data.vocab_size ({self.vocab_size}) must be at least {MIN_SPM_VOCAB}: the 4 "
                "special tokens (pad, unk, bos, eos) plus the characters of the text"
            )
        for name in ("spm_input_sentence_size", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} ({getattr(self, name)}) must be at least 1")
        if not 0.98 <= self.spm_character_coverage <= 1.0:  # SentencePiece's own bounds
            raise ValueError(
                f"data.spm_character_coverage ({self.spm_character_coverage}) must be in "
                "[0.98, 1] (SentencePiece refuses less)"
            )
        ratio = self.max_len_ratio
        if ratio is not None and not (math.isfinite(ratio) and ratio >= 1.0):  # NaN, inf
            raise ValueError(f"data.max_len_ratio ({ratio}) must be a finite number >= 1 or null")
        if self.cache_dir is not None and not self.cache_dir.strip():  # '' or spaces
            raise ValueError(
                f"data.cache_dir ({self.cache_dir!r}) is blank: give a folder, or null for "
                "<train.output_dir>/cache"
            )
        if not (math.isfinite(self.bpe_dropout) and 0.0 <= self.bpe_dropout < 1.0):
            raise ValueError(f"data.bpe_dropout ({self.bpe_dropout}) must be in [0, 1)")
        if self.bpe_dropout > 0 and self.spm_model_type != "bpe":
            raise ValueError(
                f"data.bpe_dropout ({self.bpe_dropout}) needs data.spm_model_type: bpe "
                f"(not {self.spm_model_type!r})"
            )

    def cache_directory(self, output_dir: Path) -> Path:
        """The folder of encoded corpora: `cache_dir` (`~` expanded), or `<output_dir>/cache`.

        Args:
            output_dir: The run directory (`train.output_dir`).

        Returns:
            The folder; not made here (`Preparation.make_cache_dir` makes it).
        """
        return Path(self.cache_dir).expanduser() if self.cache_dir else output_dir / "cache"
