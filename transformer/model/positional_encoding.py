"""Sinusoidal positional encoding (Vaswani et al., 2017, section 3.5)."""

from __future__ import annotations

import math

import torch
from torch import nn


def sinusoidal_table(positions: torch.Tensor, d_model: int) -> torch.Tensor:
    """The paper's encoding for the given positions, in float32 (section 3.5).

    PE(pos, 2i) = sin(pos / 10000^(2i / d_model)) and
    PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model)):
    even feature indices hold sines, odd ones cosines (interleaved, as in the paper).

    Args:
        positions: Integer positions, any shape P.
        d_model: Encoding width D (even or odd; an odd D drops the last cosine).

    Returns:
        Tensor of shape (*P, D), float32.
    """
    half = (d_model + 1) // 2
    two_i = torch.arange(half, dtype=torch.float64, device=positions.device) * 2
    inv_freq = torch.exp(-math.log(10000.0) * two_i / d_model)  # 1 / 10000^(2i / D)
    angles = positions.to(torch.float64).unsqueeze(-1) * inv_freq  # (*P,) -> (*P, D/2)
    table = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (*P, D/2) -> (*P, D/2, 2)
    table = table.flatten(-2)[..., :d_model]  # (*P, D/2, 2) -> (*P, D): sin, cos interleaved
    return table.to(torch.float32)


class PositionalEncoding(nn.Module):
    """Adds sinusoidal position information, then applies dropout (sections 3.5 and 5.4).

    A table of `max_positions` rows is precomputed (a non-persistent buffer, so checkpoints do
    not carry it); positions beyond it are computed on the fly with the same formula, so any
    length works.

    Args:
        d_model: Width D.
        dropout: P_drop applied to the sum of embeddings and positional encodings (section 5.4).
        max_positions: Number of precomputed positions.

    Shape:
        x: (B, T, D) embeddings.
        output: (B, T, D).
    """

    def __init__(self, d_model: int, dropout: float, max_positions: int = 1024) -> None:
        super().__init__()
        self.d_model = d_model
        self.dropout = nn.Dropout(dropout)
        table = sinusoidal_table(torch.arange(max_positions), d_model)
        self.register_buffer("table", table, persistent=False)

    def encoding(self, length: int, offset: int = 0) -> torch.Tensor:
        """Encodings of positions offset .. offset + length - 1, shape (length, D)."""
        end = offset + length
        if end <= self.table.shape[0]:
            return self.table[offset:end]
        positions = torch.arange(offset, end, device=self.table.device)
        return sinusoidal_table(positions, self.d_model)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Add the encodings of positions offset .. offset + T - 1 to `x` (B, T, D)."""
        pe = self.encoding(x.shape[1], offset).to(x.dtype)  # (T, D), broadcast over B
        return self.dropout(x + pe)
