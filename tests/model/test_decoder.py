"""Tests for transformer/model/decoder.py against torch.nn.TransformerDecoderLayer with copied
weights."""

import pytest
import torch

from transformer.model.decoder import Decoder, DecoderLayer

pytestmark = pytest.mark.usefixtures("no_mha_fast_path")


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("with_padding", [False, True])
def test_layer_matches_torch(
    model_config, copy_attention, copy_layer_common, norm_first, with_padding
):
    torch.manual_seed(0)
    ours = DecoderLayer(model_config(50, dropout=0.0, norm_first=norm_first)).eval()
    for p in ours.parameters():
        torch.nn.init.normal_(p, std=0.3)
    ref = torch.nn.TransformerDecoderLayer(
        32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    copy_attention(ours.self_attn, ref.self_attn)
    copy_attention(ours.cross_attn, ref.multihead_attn)
    copy_layer_common(ours, ref)
    tgt, memory = torch.randn(3, 5, 32), torch.randn(3, 7, 32)
    tgt_pad = mem_pad = None
    if with_padding:
        mem_pad = torch.zeros(3, 7, dtype=torch.bool)
        mem_pad[1, 3:] = True
        tgt_pad = torch.zeros(3, 5, dtype=torch.bool)
        tgt_pad[2, 4:] = True
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    expected = ref(
        tgt,
        memory,
        tgt_mask=causal,
        tgt_key_padding_mask=tgt_pad,
        memory_key_padding_mask=mem_pad,
    )
    torch.testing.assert_close(ours(tgt, memory, tgt_pad, mem_pad), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_steps_match_full_layer_with_several_new_positions(model_config, norm_first):
    torch.manual_seed(0)
    decoder = Decoder(model_config(50, dropout=0.0, norm_first=norm_first)).eval()
    tgt, memory = torch.randn(2, 7, 32), torch.randn(2, 4, 32)
    full = decoder(tgt, memory)
    cache = decoder.init_cache(memory)
    parts = [
        decoder(tgt[:, :3], None, cache=cache),
        decoder(tgt[:, 3:4], None, cache=cache),
        decoder(tgt[:, 4:], None, cache=cache),
    ]
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == 7
