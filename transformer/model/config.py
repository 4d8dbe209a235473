"""`ModelConfig`: the hyper-parameters of the Transformer, the `model:` section of a config.

The checkpoint stores this dataclass as a dict, so a checkpoint rebuilds its own model.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

ATTENTION_KERNELS = ("auto", "sdpa", "math")


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
        src_word_dropout: Probability of dropping a whole source token's embedding in
            training (word dropout, Sennrich et al., 2016; 0 in the paper).
        tgt_word_dropout: The same for the decoder's input tokens (the shifted target).
        norm_first: Pre-norm (LayerNorm before each sub-layer, final LayerNorm per stack)
            instead of the paper's post-norm.
        share_embeddings: Tie source embedding, target embedding and output projection.
        max_positions: Size of the precomputed sinusoidal table; longer inputs are computed
            on the fly, so this only bounds the decoder's maximum output length hint.
        layer_norm_eps: Epsilon of every LayerNorm.
        attention_kernel: "sdpa" (torch.nn.functional.scaled_dot_product_attention), "math"
            (the written-out softmax(QK^T / sqrt(d_k)) V of equation 1), or "auto" (math for
            bf16/fp16 on CPU, sdpa otherwise).
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
    src_word_dropout: float = 0.0
    tgt_word_dropout: float = 0.0
    norm_first: bool = False
    share_embeddings: bool = True
    max_positions: int = 1024
    layer_norm_eps: float = 1e-5
    attention_kernel: str = "auto"
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3

    def __post_init__(self) -> None:
        # Types first: a checkpoint's stored config reaches here unchecked by the YAML loader.
        sizes = ("vocab_size", "d_model", "d_ff", "n_heads", "max_positions")
        layers = ("n_encoder_layers", "n_decoder_layers")
        ids = ("pad_id", "unk_id", "bos_id", "eos_id")
        optional = ("tgt_vocab_size",) if self.tgt_vocab_size is not None else ()
        for name in (*sizes, *layers, *ids, *optional):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ValueError(f"model.{name} ({value!r}) must be an integer")
        for name in ("norm_first", "share_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"model.{name} ({getattr(self, name)!r}) must be true or false")
        eps = self.layer_norm_eps
        if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
            raise ValueError(f"model.layer_norm_eps ({eps!r}) must be a finite number > 0")
        for name in (*sizes, *layers):
            if getattr(self, name) < 1:
                raise ValueError(f"model.{name} ({getattr(self, name)}) must be at least 1")
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"model.d_model ({self.d_model}) must be divisible by "
                f"model.n_heads ({self.n_heads})"
            )
        if not (math.isfinite(self.layer_norm_eps) and self.layer_norm_eps > 0):
            raise ValueError(
                f"model.layer_norm_eps ({self.layer_norm_eps}) must be a finite number > 0"
            )
        dropouts = ("dropout", "attention_dropout", "activation_dropout")
        for name in (*dropouts, "src_word_dropout", "tgt_word_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(f"model.{name} ({value!r}) must be a number in [0, 1)")
            if not 0.0 <= value < 1.0:
                raise ValueError(f"model.{name} ({value}) must be in [0, 1)")
        if self.attention_kernel not in ATTENTION_KERNELS:
            raise ValueError(
                f"model.attention_kernel ({self.attention_kernel!r}) must be one of "
                f"{', '.join(ATTENTION_KERNELS)}"
            )
        if self.tgt_vocab_size is not None:
            if self.tgt_vocab_size < 1:
                raise ValueError(f"model.tgt_vocab_size ({self.tgt_vocab_size}) must be at least 1")
            if self.share_embeddings and self.tgt_vocab_size != self.vocab_size:
                default = self.vocab_size == type(self).vocab_size  # the class attribute
                raise ValueError(
                    f"model.tgt_vocab_size ({self.tgt_vocab_size}) differs from model.vocab_size "
                    f"({self.vocab_size}{', the default' if default else ''}) but "
                    "share_embeddings is True (one vocabulary for both sides); set only "
                    "vocab_size (in training, data.vocab_size sets it), or "
                    "share_embeddings: false for separate vocabularies"
                )
        ids = {n: getattr(self, n) for n in ("pad_id", "unk_id", "bos_id", "eos_id")}
        if len(set(ids.values())) != 4:
            raise ValueError(
                "the special token ids (model.pad_id, unk_id, bos_id, eos_id) must be distinct, "
                f"got {ids}"
            )
        bound = "vocab_size" if self.vocab_size <= self.target_vocab_size else "tgt_vocab_size"
        smallest_vocab = min(self.vocab_size, self.target_vocab_size)
        for name, value in ids.items():
            if value < 0:
                raise ValueError(f"model.{name} ({value}) must be at least 0")
            if value >= smallest_vocab:
                raise ValueError(
                    f"model.{name} ({value}) must be below model.{bound} ({smallest_vocab})"
                )

    @property
    def target_vocab_size(self) -> int:
        """Size of the target vocabulary (= `vocab_size` when shared)."""
        return self.vocab_size if self.tgt_vocab_size is None else self.tgt_vocab_size
