"""Tests for transformer/encoder.py against torch.nn.TransformerEncoderLayer with copied weights."""

import pytest
import torch

from transformer.model.config import ModelConfig
from transformer.model.encoder import Encoder, EncoderLayer


def _config(norm_first: bool) -> ModelConfig:
    return ModelConfig(
        vocab_size=50,
        d_model=32,
        d_ff=64,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.0,
        norm_first=norm_first,
    )


def copy_attention(ours, ref):
    """Copy our q/k/v/out projections into a torch.nn.MultiheadAttention."""
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
        )
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)


def copy_common(ours, ref):
    """Copy the feed-forward network and the layer norms shared by both layer kinds."""
    with torch.no_grad():
        ref.linear1.load_state_dict(ours.feed_forward.linear1.state_dict())
        ref.linear2.load_state_dict(ours.feed_forward.linear2.state_dict())
        for name in ("norm1", "norm2", "norm3"):
            if hasattr(ours, name):
                getattr(ref, name).load_state_dict(getattr(ours, name).state_dict())


@pytest.fixture(autouse=True)
def _no_fast_path():
    # torch.nn's inference fast path returns zeros at padded positions; compare the plain path.
    torch.backends.mha.set_fastpath_enabled(False)
    yield
    torch.backends.mha.set_fastpath_enabled(True)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("with_padding", [False, True])
def test_layer_matches_torch(norm_first, with_padding):
    torch.manual_seed(0)
    ours = EncoderLayer(_config(norm_first)).eval()
    for p in ours.parameters():
        torch.nn.init.normal_(p, std=0.3)
    ref = torch.nn.TransformerEncoderLayer(
        32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    copy_attention(ours.self_attn, ref.self_attn)
    copy_common(ours, ref)
    x = torch.randn(3, 6, 32)
    pad = None
    if with_padding:
        pad = torch.zeros(3, 6, dtype=torch.bool)
        pad[0, 4:] = True
        pad[2, 1:] = True
    torch.testing.assert_close(ours(x, pad), ref(x, src_key_padding_mask=pad), atol=1e-5, rtol=1e-5)


def test_pre_norm_stack_ends_with_layer_norm_and_post_norm_does_not():
    assert Encoder(_config(True)).norm is not None
    assert Encoder(_config(False)).norm is None
