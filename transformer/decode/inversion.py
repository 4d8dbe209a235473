"""Inverse-CDF draws: one token per row, the first whose cumulative weight exceeds u * total.

Used by every sampling mode (`transformer.decode.sampling`, `transformer.decode.nucleus_draw`).
"""

from __future__ import annotations

import torch

BLOCK = 64  # `draw`: tokens whose weights are summed together first


def draw(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw: the first token whose cumulative weight exceeds u * total.

    The cumulative weights are those of blocks of `BLOCK` tokens first, then of the tokens of
    the one block that holds u * total (a cumulative sum over the whole vocabulary is a slow,
    serial pass on a CPU; a sum of blocks is not).

    Args:
        weights: Each row's distribution, up to a factor (non-negative, a positive one per row).
        uniforms: One number in [0, 1) per row.

    Returns:
        Positions in each row (token ids when the row is the whole vocabulary), always of a
        positive weight.

    Shape:
        weights: (R, V). uniforms: (R,). output: (R,) long.
    """
    R, V = weights.shape
    if R == 0:
        return torch.empty(0, dtype=torch.long, device=weights.device)
    whole = V - V % BLOCK  # tokens in whole blocks
    sums = weights[:, :whole].reshape(R, -1, BLOCK).sum(dim=2)  # (R, V) -> (R, V // BLOCK)
    if whole < V:  # the last, shorter block
        sums = torch.cat([sums, weights[:, whole:].sum(dim=1, keepdim=True)], dim=1)  # (R, N)
    cumulative = sums.cumsum(dim=1)  # (R, N)
    target = uniforms.to(weights.dtype).unsqueeze(1) * cumulative[:, -1:]  # (R,) -> (R, 1)
    block = torch.searchsorted(cumulative, target, right=True).clamp_(max=sums.shape[1] - 1)
    target = target - (cumulative - sums).gather(1, block)  # (R, 1) left for the block
    index = block * BLOCK + torch.arange(BLOCK, device=weights.device)  # (R, 1) -> (R, BLOCK)
    inside = weights.gather(1, index.clamp(max=V - 1)) * (index < V)  # (R, BLOCK), 0 past V
    offset = torch.searchsorted(inside.cumsum(dim=1), target, right=True)  # (R, 1)
    tokens = index.gather(1, offset.clamp_(max=BLOCK - 1)).squeeze(1).clamp_(max=V - 1)  # (R,)
    # u * total can round up past the block's total: then take the block's last positive one
    zero = weights.gather(1, tokens.unsqueeze(1)).squeeze(1).eq(0)  # (R,)
    if bool(zero.any()):
        position = torch.arange(V, device=weights.device)  # (V,)
        end = (block[zero] + 1) * BLOCK  # (z, 1)
        positive = (weights[zero] > 0) & (position < end)  # (z, V)
        tokens[zero] = torch.where(positive, position, -1).max(dim=1).values  # (z, V) -> (z,)
    return tokens
