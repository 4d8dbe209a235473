"""Tests for transformer/decoder.py against torch.nn.TransformerDecoderLayer with copied weights."""

import pytest
import torch

from tests.model.test_encoder import copy_attention, copy_common
from transformer.model.config import ModelConfig
from transformer.model.decoder import DecoderLayer


@pytest.fixture(autouse=True)
def _no_fast_path():
    torch.backends.mha.set_fastpath_enabled(False)
    yield
    torch.backends.mha.set_fastpath_enabled(True)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("with_padding", [False, True])
def test_layer_matches_torch(norm_first, with_padding):
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=50, d_model=32, d_ff=64, n_heads=4, dropout=0.0, norm_first=norm_first
    )
    ours = DecoderLayer(config).eval()
    for p in ours.parameters():
        torch.nn.init.normal_(p, std=0.3)
    ref = torch.nn.TransformerDecoderLayer(
        32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    copy_attention(ours.self_attn, ref.self_attn)
    copy_attention(ours.cross_attn, ref.multihead_attn)
    copy_common(ours, ref)
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


def test_cached_steps_match_full_layer_with_several_new_positions():
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=50, d_model=32, d_ff=64, n_heads=4, dropout=0.0)
    from transformer.model.decoder import Decoder

    decoder = Decoder(config).eval()
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
