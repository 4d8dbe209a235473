"""Typed configuration: the model, data, train and decode sections of a YAML config.

Each section is a frozen dataclass whose defaults are the paper's (Vaswani et al., 2017) base
model and training recipe, and whose `__post_init__` rejects out-of-range values by name.
Reading YAML files and dotted command-line overrides onto them is `transformer.config_file`.
The train section, the longest, lives in `transformer.train_config` (re-exported here).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

from transformer.train_config import TrainConfig

# The smallest SentencePiece vocabulary: pad, unk, bos, eos and at least one character.
MIN_SPM_VOCAB = 5


@dataclass(frozen=True)
class ModelConfig:
    """Hyper-parameters of the Transformer (section 3; Table 3 of the paper).

    Defaults are the base model: d_model 512, d_ff 2048, 8 heads, 6 encoder and 6 decoder layers,
    residual dropout 0.1 (section 5.4), no attention or ReLU dropout, post-norm (section 3.1),
    source embedding = target embedding = pre-softmax projection (section 3.4).

    Args:
        vocab_size: Size of the (shared) vocabulary; the source vocabulary when
            `share_embeddings` is False.
        tgt_vocab_size: Target vocabulary size when `share_embeddings` is False; None means
            the same as `vocab_size`. Must be None or equal to `vocab_size` when shared.
        d_model: Model width D (section 3).
        d_ff: Inner width F of the position-wise feed-forward network (equation 2).
        n_heads: Number of attention heads H; d_k = d_v = d_model / n_heads (section 3.2.2).
        n_encoder_layers: Encoder layers N (section 3.1).
        n_decoder_layers: Decoder layers N (section 3.1).
        dropout: Residual dropout P_drop on each sub-layer output and on embeddings +
            positional encodings (section 5.4).
        attention_dropout: Dropout on attention weights (0 in the paper).
        activation_dropout: Dropout after the ReLU of the feed-forward network (0 in the paper).
        norm_first: Pre-norm (LayerNorm before each sub-layer, final LayerNorm per stack)
            instead of the paper's post-norm.
        share_embeddings: Tie source embedding, target embedding and output projection.
        max_positions: Size of the precomputed sinusoidal table; longer inputs are computed
            on the fly, so this only bounds the decoder's maximum output length hint.
        layer_norm_eps: Epsilon of every LayerNorm.
        attention_kernel: "sdpa" (torch.nn.functional.scaled_dot_product_attention), "math"
            (the written-out softmax(QK^T / sqrt(d_k)) V of equation 1), or "auto" (math for
            bf16/fp16 on CPU, sdpa otherwise).
        linear_kernel: Float32 CPU matrix products: "auto" (oneDNN on x86-64 CPUs, else
            torch.nn.functional.linear), "onednn" or "torch"; see `transformer.linear`.
        pad_id, unk_id, bos_id, eos_id: Special token ids (match the SentencePiece model).

    Raises:
        ValueError: when a value is out of range, naming it.
    """

    vocab_size: int = 37000
    tgt_vocab_size: int | None = None
    d_model: int = 512
    d_ff: int = 2048
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    norm_first: bool = False
    share_embeddings: bool = True
    max_positions: int = 1024
    layer_norm_eps: float = 1e-5
    attention_kernel: str = "auto"
    linear_kernel: str = "auto"
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3

    def __post_init__(self) -> None:
        sizes = ("vocab_size", "d_model", "d_ff", "n_heads", "max_positions")
        for name in (*sizes, "n_encoder_layers", "n_decoder_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ValueError(f"{name} ({value!r}) must be an integer")
            if value < 1:
                raise ValueError(f"{name} ({getattr(self, name)}) must be at least 1")
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if not (math.isfinite(self.layer_norm_eps) and self.layer_norm_eps > 0):
            raise ValueError(f"layer_norm_eps ({self.layer_norm_eps}) must be a finite number > 0")
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} ({value}) must be in [0, 1)")
        if self.attention_kernel not in ("auto", "sdpa", "math"):
            raise ValueError(
                f"attention_kernel ({self.attention_kernel!r}) must be 'auto', 'sdpa' or 'math'"
            )
        if self.linear_kernel not in ("auto", "onednn", "torch"):
            raise ValueError(
                f"linear_kernel ({self.linear_kernel!r}) must be 'auto', 'onednn' or 'torch'"
            )
        if self.tgt_vocab_size is not None:
            if self.tgt_vocab_size < 1:
                raise ValueError(f"tgt_vocab_size ({self.tgt_vocab_size}) must be at least 1")
            if self.share_embeddings and self.tgt_vocab_size != self.vocab_size:
                raise ValueError(
                    f"tgt_vocab_size ({self.tgt_vocab_size}) differs from vocab_size "
                    f"({self.vocab_size}) but share_embeddings is True; set "
                    "share_embeddings: false for separate vocabularies"
                )
        ids = {n: getattr(self, n) for n in ("pad_id", "unk_id", "bos_id", "eos_id")}
        if len(set(ids.values())) != 4:
            raise ValueError(f"special token ids must be distinct, got {ids}")
        smallest_vocab = min(self.vocab_size, self.target_vocab_size)
        for name, value in ids.items():
            if not 0 <= value < smallest_vocab:
                raise ValueError(f"{name} ({value}) must be in [0, {smallest_vocab})")

    @property
    def target_vocab_size(self) -> int:
        """Size of the target vocabulary (= `vocab_size` when shared)."""
        return self.vocab_size if self.tgt_vocab_size is None else self.tgt_vocab_size

    @property
    def d_k(self) -> int:
        """Per-head width d_k = d_v = d_model / n_heads (section 3.2.2)."""
        return self.d_model // self.n_heads


@dataclass(frozen=True)
class DataConfig:
    """The `data:` section: where parallel text comes from and how it becomes batches.

    `train`, `valid` and `test` are either a local path prefix (`multi30k/train` reads
    `multi30k/train.en` and `multi30k/train.de`; relative paths are resolved against
    $TRANSFORMER_DATA_DIR when set, else the current directory) or a Hugging Face `datasets`
    spec `hf:NAME:CONFIG:SPLIT` (e.g. `hf:wmt14:de-en:train`; CONFIG may be empty). Swap
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
        max_len_ratio: Also drop pairs where max(len) / min(len) exceeds this; null = off.
        cache_dir: Where encoded corpora are cached; null = `<output_dir>/cache`.
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

    def __post_init__(self) -> None:
        if self.source_lang == self.target_lang:
            raise ValueError(f"source_lang and target_lang are both {self.source_lang!r}")
        if self.spm_model_type not in ("bpe", "unigram"):
            raise ValueError(f"spm_model_type ({self.spm_model_type!r}) must be 'bpe' or 'unigram'")
        if self.vocab_size < MIN_SPM_VOCAB:
            raise ValueError(
                f"data.vocab_size ({self.vocab_size}) must be at least {MIN_SPM_VOCAB}: the 4 "
                "special tokens (pad, unk, bos, eos) plus the characters of the text"
            )
        for name in ("spm_input_sentence_size", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} ({getattr(self, name)}) must be at least 1")
        if not 0.0 < self.spm_character_coverage <= 1.0:
            raise ValueError(
                f"spm_character_coverage ({self.spm_character_coverage}) must be in (0, 1]"
            )
        if self.max_len_ratio is not None and self.max_len_ratio < 1.0:
            raise ValueError(f"max_len_ratio ({self.max_len_ratio}) must be at least 1 or null")


@dataclass(frozen=True)
class DecodeConfig:
    """The `decode:` section: beam search as in section 6.1 of the paper.

    Raises:
        ValueError: for a value out of range, naming the key (`decode.beam_size`, ...).
    """

    beam_size: int = 4
    length_penalty: float = 0.6
    length_penalty_style: str = "gnmt"
    max_len_a: float = 1.0
    max_len_b: int = 50
    max_tokens: int = 4096

    def __post_init__(self) -> None:
        for name in ("beam_size", "max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"decode.{name} ({getattr(self, name)}) must be at least 1")
        for name in ("length_penalty", "max_len_a", "max_len_b"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):  # also rejects NaN
                raise ValueError(f"decode.{name} ({value}) must be a finite number >= 0")
        if self.length_penalty_style not in ("gnmt", "power"):
            raise ValueError(
                f"decode.length_penalty_style ({self.length_penalty_style!r}) must be one of "
                "gnmt, power"
            )


@dataclass(frozen=True)
class Config:
    """A whole experiment: one dataclass per YAML section."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
