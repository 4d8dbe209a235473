"""The decoder stack (Vaswani et al., 2017, section 3.1 and Figure 1, right)."""

from __future__ import annotations

import torch
from torch import nn

from transformer.model.attention import MultiHeadAttention
from transformer.model.cache import DecoderCache, LayerCache
from transformer.model.config import ModelConfig
from transformer.model.feed_forward import PositionwiseFeedForward
from transformer.model.masking import causal_mask


class DecoderLayer(nn.Module):
    """Masked self-attention, attention over the encoder output, and a feed-forward network.

    Section 3.1: "In addition to the two sub-layers in each encoder layer, the decoder inserts a
    third sub-layer, which performs multi-head attention over the output of the encoder stack."
    Each sub-layer is wrapped as LayerNorm(x + Dropout(Sublayer(x))) (post-norm, the paper's
    choice), or x + Dropout(Sublayer(LayerNorm(x))) with `config.norm_first`. Names follow
    `torch.nn.TransformerDecoderLayer` (`self_attn`, `norm1..3`), except that its
    `multihead_attn` is called `cross_attn` here.

    Args:
        config: The model's hyper-parameters.

    Shape:
        tgt: (B, T, D). memory: (B, S, D).
        tgt_key_padding_mask: (B, T), True at padding. memory_key_padding_mask: (B, S), True at
        padding. output: (B, T, D).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.norm_first = config.norm_first
        d, h = config.d_model, config.n_heads
        attention = (config.attention_dropout, config.attention_kernel)
        self.self_attn = MultiHeadAttention(d, h, *attention)
        self.cross_attn = MultiHeadAttention(d, h, *attention)
        self.feed_forward = PositionwiseFeedForward(d, config.d_ff, config.activation_dropout)
        self.norm1 = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.norm2 = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.norm3 = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)
        self.dropout3 = nn.Dropout(config.dropout)

    def forward(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor | None,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
        cache: LayerCache | None = None,
    ) -> torch.Tensor:
        """Run one decoder layer; with `cache`, `tgt` holds only the new positions."""
        x = tgt
        if self.norm_first:
            x = x + self._self_attn_block(self.norm1(x), tgt_key_padding_mask, cache)
            x = x + self._cross_attn_block(self.norm2(x), memory, memory_key_padding_mask, cache)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._self_attn_block(x, tgt_key_padding_mask, cache))
            x = self.norm2(x + self._cross_attn_block(x, memory, memory_key_padding_mask, cache))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _self_attn_block(self, x, key_padding_mask, cache: LayerCache | None) -> torch.Tensor:
        if cache is None:
            out, _ = self.self_attn(
                x, x, x, key_padding_mask=key_padding_mask, is_causal=True, need_weights=False
            )
            return self.dropout1(out)
        offset = 0 if cache.self_k is None else cache.self_k.shape[2]
        kv = cache.append_self(*self.self_attn.project_kv(x, x))  # two (B, H, offset + T, Dk)
        T = x.shape[1]
        # One new position may attend every cached one; several need the shifted causal mask.
        mask = causal_mask(T, offset + T, offset, x.device) if T > 1 else None
        out, _ = self.self_attn(x, attn_mask=mask, need_weights=False, projected_kv=kv)
        return self.dropout1(out)

    def _cross_attn_block(self, x, memory, key_padding_mask, cache: LayerCache | None):
        kv = None if cache is None else (cache.cross_k, cache.cross_v)
        out, _ = self.cross_attn(
            x,
            memory,
            memory,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            projected_kv=kv,
        )
        return self.dropout2(out)

    def _ff_block(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout3(self.feed_forward(x))


class Decoder(nn.Module):
    """A stack of N identical decoder layers (section 3.1), with a final LayerNorm for pre-norm.

    Args:
        config: The model's hyper-parameters.

    Shape:
        tgt: (B, T, D) embedded target (shifted right). memory: (B, S, D).
        output: (B, T, D).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_decoder_layers))
        self.norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None
        )

    def init_cache(self, memory: torch.Tensor) -> DecoderCache:
        """Project `memory` into every layer's cross-attention keys and values, once.

        Shape:
            memory: (B, S, D). Each cached tensor: (B, H, S, Dk).
        """
        return DecoderCache(
            [LayerCache(*layer.cross_attn.project_kv(memory, memory)) for layer in self.layers]
        )

    def forward(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor | None,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> torch.Tensor:
        """Run all layers (see the class docstring for shapes)."""
        x = tgt
        for i, layer in enumerate(self.layers):
            layer_cache = None if cache is None else cache.layers[i]
            x = layer(x, memory, tgt_key_padding_mask, memory_key_padding_mask, layer_cache)
        return self.norm(x) if self.norm is not None else x
