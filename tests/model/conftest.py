"""Fixtures of the model tests: torch.nn references (copying our weights into torch.nn's
attention and layers, and its fast path turned off)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def copy_attention():
    """`copy_attention(ours, ref)`: our q/k/v/out projections into a torch.nn.MultiheadAttention."""
    import torch

    def copy(ours, ref) -> None:
        with torch.no_grad():
            ref.in_proj_weight.copy_(
                torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
            )
            ref.in_proj_bias.copy_(
                torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias])
            )
            ref.out_proj.weight.copy_(ours.out_proj.weight)
            ref.out_proj.bias.copy_(ours.out_proj.bias)

    return copy


@pytest.fixture(scope="session")
def copy_layer_common():
    """`copy_layer_common(ours, ref)`: the feed-forward network and layer norms of one of our
    encoder/decoder layers into a torch.nn.TransformerEncoderLayer/TransformerDecoderLayer."""
    import torch

    def copy(ours, ref) -> None:
        with torch.no_grad():
            ref.linear1.load_state_dict(ours.feed_forward.linear1.state_dict())
            ref.linear2.load_state_dict(ours.feed_forward.linear2.state_dict())
            for name in ("norm1", "norm2", "norm3"):
                if hasattr(ours, name):
                    getattr(ref, name).load_state_dict(getattr(ours, name).state_dict())

    return copy


@pytest.fixture
def no_mha_fast_path():
    """torch.nn's inference fast path returns zeros at padded positions; compare the plain path."""
    import torch

    torch.backends.mha.set_fastpath_enabled(False)
    yield
    torch.backends.mha.set_fastpath_enabled(True)
