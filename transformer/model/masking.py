"""Boolean masks in torch.nn's convention: True marks a position that may NOT be attended.

Section 3.2.3 of Vaswani et al. (2017): the decoder's self-attention masks out "all values in
the input of the softmax which correspond to illegal connections" (future positions), and
padding keys are never attended.
"""

from __future__ import annotations

import torch


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """True where `tokens` hold padding.

    Args:
        tokens: Token ids.
        pad_id: The padding id.

    Returns:
        Bool tensor, True at padding (not attended).

    Shape:
        tokens: (B, L). output: (B, L).
    """
    return tokens.eq(pad_id)


def causal_mask(
    length: int,
    key_length: int | None = None,
    offset: int = 0,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """True above the (shifted) diagonal: query i may not attend key j when j > i + offset.

    With a decoder cache holding `offset` earlier positions, the T new queries are absolute
    positions offset .. offset + T - 1 and the keys are positions 0 .. key_length - 1.

    Args:
        length: Number of queries T.
        key_length: Number of keys (default T + offset).
        offset: Absolute position of the first query.
        device: Device of the result.

    Returns:
        Bool tensor, True at future positions (not attended).

    Shape:
        output: (T, key_length).
    """
    if key_length is None:
        key_length = length + offset
    query_pos = torch.arange(length, device=device).unsqueeze(1) + offset  # (T,) -> (T, 1)
    key_pos = torch.arange(key_length, device=device).unsqueeze(0)  # (L,) -> (1, L)
    return key_pos > query_pos
