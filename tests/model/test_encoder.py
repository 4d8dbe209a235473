"""Tests for transformer/model/encoder.py against torch.nn.TransformerEncoderLayer with copied
weights."""

import pytest
import torch

from transformer.model.encoder import Encoder, EncoderLayer

pytestmark = pytest.mark.usefixtures("no_mha_fast_path")


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("with_padding", [False, True])
def test_layer_matches_torch(
    model_config, copy_attention, copy_layer_common, norm_first, with_padding
):
    torch.manual_seed(0)
    ours = EncoderLayer(model_config(50, dropout=0.0, norm_first=norm_first)).eval()
    for p in ours.parameters():
        torch.nn.init.normal_(p, std=0.3)
    ref = torch.nn.TransformerEncoderLayer(
        32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    copy_attention(ours.self_attn, ref.self_attn)
    copy_layer_common(ours, ref)
    x = torch.randn(3, 6, 32)
    pad = None
    if with_padding:
        pad = torch.zeros(3, 6, dtype=torch.bool)
        pad[0, 4:] = True
        pad[2, 1:] = True
    torch.testing.assert_close(ours(x, pad), ref(x, src_key_padding_mask=pad), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_stack_matches_torch_transformer_encoder(
    model_config, copy_attention, copy_layer_common, norm_first
):
    """The whole stack (two layers, plus the final LayerNorm of pre-norm) against
    torch.nn.TransformerEncoder with the same weights."""
    torch.manual_seed(0)
    ours = Encoder(model_config(50, dropout=0.0, norm_first=norm_first)).eval()
    for p in ours.parameters():
        torch.nn.init.normal_(p, std=0.3)
    layer = torch.nn.TransformerEncoderLayer(
        32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    final_norm = torch.nn.LayerNorm(32) if norm_first else None
    ref = torch.nn.TransformerEncoder(layer, 2, norm=final_norm, enable_nested_tensor=False).eval()
    for mine, theirs in zip(ours.layers, ref.layers, strict=True):
        copy_attention(mine.self_attn, theirs.self_attn)
        copy_layer_common(mine, theirs)
    if norm_first:
        ref.norm.load_state_dict(ours.norm.state_dict())
    else:
        assert ours.norm is None  # post-norm: each layer already ends with its LayerNorm
    x = torch.randn(3, 6, 32)
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[1, 2:] = True
    torch.testing.assert_close(ours(x, pad), ref(x, src_key_padding_mask=pad), atol=1e-5, rtol=1e-5)
