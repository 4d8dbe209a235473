"""Token embeddings scaled by sqrt(d_model) (Vaswani et al., 2017, section 3.4)."""

from __future__ import annotations

import math

import torch
from torch import nn


class TokenEmbedding(nn.Module):
    """Learned embedding whose output is multiplied by sqrt(d_model) (section 3.4).

    "In the embedding layers, we multiply those weights by sqrt(d_model)." The weight matrix
    is shared with the pre-softmax projection when the vocabulary is shared (section 3.4), so
    it is initialised with N(0, d_model^-0.5): after the sqrt(d_model) scaling, embeddings have
    unit variance, and as the output projection its logits start at a sensible scale.

    Args:
        vocab_size: Number of tokens V.
        d_model: Embedding width D.
        pad_id: Id of the padding token; its row is zero and receives no gradient.

    Shape:
        tokens: (B, T) long.
        output: (B, T, D).
    """

    def __init__(self, vocab_size: int, d_model: int, pad_id: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        self.pad_id = pad_id
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """N(0, d_model^-0.5) initialisation with a zero padding row."""
        nn.init.normal_(self.weight, mean=0.0, std=self.d_model**-0.5)
        with torch.no_grad():
            self.weight[self.pad_id].zero_()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Look up and scale: (B, T) -> (B, T, D)."""
        embedded = nn.functional.embedding(tokens, self.weight, padding_idx=self.pad_id)
        return embedded * math.sqrt(self.d_model)
