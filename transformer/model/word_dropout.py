"""Word dropout: whole token embeddings dropped in training (Sennrich et al., 2016).

Not in the Transformer paper. Sennrich, Haddow and Birch (2016, "Edinburgh Neural Machine
Translation Systems for WMT 16") drop entire words, not single units, on the source and the
target side with probability 0.1 for their smallest corpus (English<->Romanian); Gal and
Ghahramani (2016) call it embedding dropout; Marian names the options `--dropout-src` and
`--dropout-trg`. A dropped token's embedding becomes zero (its positional encoding, added
afterwards, stays), so the model must translate from the context; kept embeddings are
scaled by 1 / (1 - p) like `nn.Dropout`.
"""

from __future__ import annotations

import torch
from torch import nn


class WordDropout(nn.Module):
    """Zero each token's whole embedding with probability p in training; identity in eval.

    The mask is `torch.rand(B, T, 1) < 1 - p` (one draw per token, shared by its D units),
    from the default generator of the input's device, scaled by 1 / (1 - p) where kept.

    Args:
        p: Probability of dropping a token, in [0, 1) (validated by `ModelConfig`).

    Shape:
        Input: (B, T, D) embeddings; output: the same.
    """

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, embedded: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return embedded
        keep = 1.0 - self.p
        batch, length, _ = embedded.shape
        uniform = torch.rand(batch, length, 1, device=embedded.device)  # (B, T, 1) in [0, 1)
        mask = (uniform < keep).to(embedded.dtype).mul_(1.0 / keep)  # 1 / (1 - p) where kept
        return embedded * mask  # (B, T, 1) broadcast over D

    def extra_repr(self) -> str:
        return f"p={self.p}"
