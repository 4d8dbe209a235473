"""The Transformer (Vaswani et al., 2017, "Attention Is All You Need", section 3, Figure 1)."""

from __future__ import annotations

import torch
from torch import nn

from transformer.model.cache import DecoderCache
from transformer.model.config import ModelConfig
from transformer.model.decoder import Decoder
from transformer.model.embeddings import TokenEmbedding
from transformer.model.encoder import Encoder
from transformer.model.masking import padding_mask
from transformer.model.positional_encoding import PositionalEncoding
from transformer.model.word_dropout import WordDropout


class Transformer(nn.Module):
    """Encoder-decoder Transformer for sequence transduction (section 3).

    Embeddings scaled by sqrt(d_model) plus sinusoidal positional encodings feed an encoder
    stack and a decoder stack; a linear layer and softmax give next-token probabilities.
    With `share_embeddings` (a shared source-target vocabulary, section 3.4) the source
    embedding, the target embedding and the pre-softmax projection are one matrix; otherwise
    the target embedding and the projection are tied and the source has its own embedding.
    Linear layers use Xavier-uniform initialisation with zero biases. Optional word dropout
    (`src_word_dropout`, `tgt_word_dropout`; not in the paper) zeroes whole token embeddings
    in training, before the positional encodings are added (`WordDropout`).

    The model offers `encode` and `decode` (with an optional incremental `DecoderCache`);
    search algorithms live in `transformer.decode`.

    Args:
        config: Hyper-parameters (defaults: the paper's base model).

    Shape:
        src: (B, S) long, right-padded (real tokens first, then `pad_id`). tgt_in: (B, T) long,
        the target shifted right (bos first), right-padded too.
        output: (B, T, V) logits over the target vocabulary.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.src_embed = TokenEmbedding(config.vocab_size, config.d_model, config.pad_id)
        if config.share_embeddings:
            self.tgt_embed = self.src_embed
        else:
            self.tgt_embed = TokenEmbedding(config.target_vocab_size, config.d_model, config.pad_id)
        self.src_word_dropout = WordDropout(config.src_word_dropout)
        self.tgt_word_dropout = WordDropout(config.tgt_word_dropout)
        self.positional_encoding = PositionalEncoding(
            config.d_model, config.dropout, config.max_positions
        )
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.output_projection = nn.Linear(config.d_model, config.target_vocab_size, bias=False)
        self._reset_linear_layers()
        self.output_projection.weight = self.tgt_embed.weight

    def _reset_linear_layers(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def encode(
        self, src: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Encode a batch of source sentences into `memory`.

        Args:
            src: Source token ids.
            src_key_padding_mask: True at padding; derived from `config.pad_id` when None.

        Returns:
            memory, the encoder output.

        Shape:
            src: (B, S), right-padded: each row's real tokens first, then `pad_id` (positions
            count from column 0, so left padding would shift them; not checked here).
            src_key_padding_mask: (B, S) bool, True at padding. output: (B, S, D).
        """
        if src_key_padding_mask is None:
            src_key_padding_mask = padding_mask(src, self.config.pad_id)
        x = self.src_word_dropout(self.src_embed(src))  # (B, S) -> (B, S, D)
        x = self.positional_encoding(x)
        return self.encoder(x, src_key_padding_mask)

    def init_cache(self, memory: torch.Tensor) -> DecoderCache:
        """Start incremental decoding: computes cross-attention keys and values once.

        Shape:
            memory: (B, S, D).
        """
        return self.decoder.init_cache(memory)

    def decode(
        self,
        tgt_in: torch.Tensor,
        memory: torch.Tensor | None,
        memory_key_padding_mask: torch.Tensor | None = None,
        tgt_key_padding_mask: torch.Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> torch.Tensor:
        """Next-token logits for every target position, given the encoder output.

        Target positions are masked causally, so right-padding of `tgt_in` never reaches a real
        position and `tgt_key_padding_mask` is optional. With `cache`, `tgt_in` holds only the
        new positions (usually one), which are appended to the cache; `memory` may then be None.

        Args:
            tgt_in: Target ids shifted right (bos first), or the new ids when `cache` is given.
            memory: Encoder output.
            memory_key_padding_mask: True at source padding; None attends every position.
            tgt_key_padding_mask: True at target padding (not allowed with `cache`).
            cache: From `init_cache`; updated in place.

        Returns:
            Logits.

        Shape:
            tgt_in: (B, T). memory: (B, S, D). memory_key_padding_mask: (B, S).
            output: (B, T, V).

        Raises:
            ValueError: when both `cache` and `tgt_key_padding_mask` are given.
        """
        if cache is not None and tgt_key_padding_mask is not None:
            raise ValueError("tgt_key_padding_mask is not supported with a decoder cache")
        offset = 0 if cache is None else cache.length
        x = self.tgt_word_dropout(self.tgt_embed(tgt_in))  # (B, T) -> (B, T, D)
        x = self.positional_encoding(x, offset)
        x = self.decoder(x, memory, tgt_key_padding_mask, memory_key_padding_mask, cache)
        return self.output_projection(x)  # (B, T, D) -> (B, T, V)

    def forward(
        self,
        src: torch.Tensor,
        tgt_in: torch.Tensor,
        src_key_padding_mask: torch.Tensor | None = None,
        tgt_key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Teacher-forced logits: `decode(tgt_in, encode(src))`.

        Args:
            src: Source ids.
            tgt_in: Target ids shifted right.
            src_key_padding_mask: True at source padding; derived from `config.pad_id` if None.
            tgt_key_padding_mask: True at target padding (optional, see `decode`).

        Returns:
            Logits.

        Shape:
            src: (B, S), right-padded (real tokens first, then `pad_id`; see `encode`).
            tgt_in: (B, T), right-padded too. output: (B, T, V).
        """
        if src_key_padding_mask is None:
            src_key_padding_mask = padding_mask(src, self.config.pad_id)
        memory = self.encode(src, src_key_padding_mask)
        return self.decode(tgt_in, memory, src_key_padding_mask, tgt_key_padding_mask)
