"""Position-wise feed-forward network (Vaswani et al., 2017, section 3.3, equation 2)."""

from __future__ import annotations

import torch
from torch import nn


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (equation 2), applied to each position separately.

    Args:
        d_model: Input and output width D (512 in the base model).
        d_ff: Inner width F (2048 in the base model).
        activation_dropout: Dropout after the ReLU (0 in the paper; common in later recipes).

    Shape:
        x: (B, T, D).
        output: (B, T, D).
    """

    def __init__(self, d_model: int, d_ff: int, activation_dropout: float = 0.0) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(activation_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, F) -> (B, T, D)."""
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))
