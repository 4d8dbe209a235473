"""Position-wise feed-forward network (Vaswani et al., 2017, section 3.3, equation 2)."""

from __future__ import annotations

import torch
from torch import nn

from transformer.linear import Linear


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (equation 2), applied to each position separately.

    Args:
        d_model: Input and output width D (512 in the base model).
        d_ff: Inner width F (2048 in the base model).
        activation_dropout: Dropout after the ReLU (0 in the paper; common in later recipes).
        linear_kernel: Kernel of W_1 and W_2 (see `transformer.linear.Linear`).

    Shape:
        x: (B, T, D).
        output: (B, T, D).
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        activation_dropout: float = 0.0,
        linear_kernel: str = "auto",
    ) -> None:
        super().__init__()
        self.linear1 = Linear(d_model, d_ff, kernel=linear_kernel)
        self.linear2 = Linear(d_ff, d_model, kernel=linear_kernel)
        self.dropout = nn.Dropout(activation_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, F) -> (B, T, D)."""
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))
