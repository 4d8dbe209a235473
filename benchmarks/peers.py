"""The two peers of our model in `benchmarks/benchmark.py`, built with our arithmetic.

- `TorchNNPeer`: `torch.nn.Transformer` with the same tied embedding / output projection, the
  sqrt(d_model) embedding scale and the same sinusoidal encodings; its two extra final
  LayerNorms are removed and its attention and feed-forward dropouts set to 0, so it computes the
  paper's post-norm model with residual dropout only, like ours.
- `marian_peer`: Hugging Face `MarianMTModel` (random weights) with the same sizes, ReLU, scaled
  embeddings, static sinusoidal positions, dropout on residuals only, one shared embedding matrix
  tied to the output projection.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.nn import functional as F

from transformer.model.positional_encoding import sinusoidal_table

if TYPE_CHECKING:
    from benchmarks.engines import Dims

PAD_ID, BOS_ID, EOS_ID = 0, 2, 3  # ModelConfig defaults, used by every engine


class TorchNNPeer(nn.Module):
    """`torch.nn.Transformer` wrapped into the paper's model with our arithmetic (see module doc).

    Shape:
        src: (B, S). tgt_in: (B, T). output: (B, T, V).
    """

    def __init__(self, dims: Dims) -> None:
        super().__init__()
        self.d_model = dims.d_model
        self.embed = nn.Embedding(dims.vocab_size, dims.d_model, padding_idx=PAD_ID)
        nn.init.normal_(self.embed.weight, std=dims.d_model**-0.5)
        table = sinusoidal_table(torch.arange(dims.max_positions), dims.d_model)
        self.register_buffer("pe", table, persistent=False)
        self.dropout = nn.Dropout(dims.dropout)
        self.transformer = nn.Transformer(
            dims.d_model,
            dims.n_heads,
            dims.n_layers,
            dims.n_layers,
            dims.d_ff,
            dims.dropout,
            batch_first=True,
        )
        self.transformer.encoder.norm = None  # post-norm layers already end with a LayerNorm
        self.transformer.decoder.norm = None
        for layer in [*self.transformer.encoder.layers, *self.transformer.decoder.layers]:
            layer.self_attn.dropout = 0.0  # residual dropout only (paper, HF Marian, ours)
            layer.dropout = nn.Identity()  # torch.nn's dropout after the feed-forward ReLU
            if hasattr(layer, "multihead_attn"):
                layer.multihead_attn.dropout = 0.0

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) * math.sqrt(self.d_model)  # (B, L) -> (B, L, D)
        return self.dropout(x + self.pe[: tokens.shape[1]])

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        src_padding = src.eq(PAD_ID)  # (B, S), True at padding
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1])  # (T, T)
        out = self.transformer(
            self._embed(src),
            self._embed(tgt_in),
            tgt_mask=causal,
            src_key_padding_mask=src_padding,
            memory_key_padding_mask=src_padding,
            tgt_is_causal=True,
        )  # (B, T, D)
        return F.linear(out, self.embed.weight)  # (B, T, D) -> (B, T, V), tied projection


def marian_peer(dims: Dims) -> nn.Module:
    """Hugging Face `MarianMTModel` with our sizes and arithmetic, random weights.

    Raises:
        AssertionError: if the embeddings and output projection are not one matrix.
    """
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(
        vocab_size=dims.vocab_size,
        decoder_vocab_size=dims.vocab_size,
        d_model=dims.d_model,
        encoder_layers=dims.n_layers,
        decoder_layers=dims.n_layers,
        encoder_attention_heads=dims.n_heads,
        decoder_attention_heads=dims.n_heads,
        encoder_ffn_dim=dims.d_ff,
        decoder_ffn_dim=dims.d_ff,
        activation_function="relu",
        dropout=dims.dropout,
        attention_dropout=0.0,
        activation_dropout=0.0,
        scale_embedding=True,
        max_position_embeddings=dims.max_positions,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        decoder_start_token_id=BOS_ID,
        forced_eos_token_id=None,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
    )
    model = MarianMTModel(config)
    shared = model.model.shared.weight.data_ptr()
    assert model.lm_head.weight.data_ptr() == shared
    assert model.model.encoder.embed_tokens.weight.data_ptr() == shared
    return model
