"""Key/value cache for incremental decoding (used by greedy and beam search).

Decoding step t of the auto-regressive decoder (section 3.1: "consuming the previously
generated symbols as additional input") only needs the queries of the new position: the
self-attention keys and values of earlier positions are kept here, so a step costs O(t) instead
of O(t^2), and the cross-attention keys and values of `memory` are computed once per source.
"""

from __future__ import annotations

import torch


class LayerCache:
    """Cached per-head keys and values of one decoder layer.

    Shape:
        self_k, self_v: (B, H, t, Dk), the t positions decoded so far (None before the first step).
        cross_k, cross_v: (B, H, S, Dk), projected `memory`.
    """

    def __init__(self, cross_k: torch.Tensor, cross_v: torch.Tensor) -> None:
        self.cross_k = cross_k
        self.cross_v = cross_v
        self.self_k: torch.Tensor | None = None
        self.self_v: torch.Tensor | None = None

    def append_self(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append new positions' keys/values (B, H, t_new, Dk) and return all of them."""
        if self.self_k is None:
            self.self_k, self.self_v = k, v
        else:
            self.self_k = torch.cat((self.self_k, k), dim=2)  # (B, H, t, Dk) -> (B, H, t+1, Dk)
            self.self_v = torch.cat((self.self_v, v), dim=2)
        return self.self_k, self.self_v

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows `index` of the batch, in that order (duplicates allowed)."""
        self.cross_k = self.cross_k.index_select(0, index)  # (B, H, S, Dk) -> (B', H, S, Dk)
        self.cross_v = self.cross_v.index_select(0, index)
        if self.self_k is not None:
            self.self_k = self.self_k.index_select(0, index)  # (B, H, t, Dk) -> (B', H, t, Dk)
            self.self_v = self.self_v.index_select(0, index)


class DecoderCache:
    """The caches of all decoder layers, made by `Transformer.init_cache`.

    Args:
        layers: One `LayerCache` per decoder layer.
    """

    def __init__(self, layers: list[LayerCache]) -> None:
        self.layers = layers

    @property
    def length(self) -> int:
        """Number of target positions already decoded."""
        first = self.layers[0].self_k
        return 0 if first is None else first.shape[2]

    def reorder(self, index: torch.Tensor) -> None:
        """Select, reorder or repeat batch rows in place (beam reordering, dropping finished rows).

        Args:
            index: Long tensor of row indices into the current batch.

        Shape:
            index: (B',); every cached tensor goes from (B, ...) to (B', ...).
        """
        for layer in self.layers:
            layer.reorder(index)
