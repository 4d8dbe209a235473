"""The encoder stack (Vaswani et al., 2017, section 3.1 and Figure 1, left)."""

from __future__ import annotations

import torch
from torch import nn

from transformer.model.attention import MultiHeadAttention
from transformer.model.config import ModelConfig
from transformer.model.feed_forward import PositionwiseFeedForward


class EncoderLayer(nn.Module):
    """Self-attention and a feed-forward network, each wrapped in a residual block (section 3.1).

    Post-norm, the paper's choice: x = LayerNorm(x + Dropout(Sublayer(x))). With
    `config.norm_first` (pre-norm): x = x + Dropout(Sublayer(LayerNorm(x))).
    Parameter names follow `torch.nn.TransformerEncoderLayer` (`self_attn`, `norm1`, `norm2`).

    Args:
        config: The model's hyper-parameters.

    Shape:
        src: (B, S, D). src_key_padding_mask: (B, S) bool, True at padding (not attended).
        output: (B, S, D).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.norm_first = config.norm_first
        self.self_attn = MultiHeadAttention(
            config.d_model,
            config.n_heads,
            config.attention_dropout,
            config.attention_kernel,
        )
        self.feed_forward = PositionwiseFeedForward(
            config.d_model, config.d_ff, config.activation_dropout
        )
        self.norm1 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.norm2 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)

    def forward(
        self, src: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Run one encoder layer (see the class docstring for shapes)."""
        x = src
        if self.norm_first:
            x = x + self._self_attn_block(self.norm1(x), src_key_padding_mask)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._self_attn_block(x, src_key_padding_mask))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _self_attn_block(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None):
        out, _ = self.self_attn(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)
        return self.dropout1(out)

    def _ff_block(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout2(self.feed_forward(x))


class Encoder(nn.Module):
    """A stack of N identical encoder layers (section 3.1; N = 6 in the base model).

    With pre-norm a final LayerNorm normalises the stack's output (post-norm layers already end
    with one).

    Args:
        config: The model's hyper-parameters.

    Shape:
        src: (B, S, D) embedded source. src_key_padding_mask: (B, S), True at padding.
        output: (B, S, D), the `memory` the decoder attends to.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layers))
        self.norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
        )

    def forward(
        self, src: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Run all layers (see the class docstring for shapes)."""
        x = src
        for layer in self.layers:
            x = layer(x, src_key_padding_mask)
        return self.norm(x) if self.norm is not None else x
