"""Tests for transformer/model/cache.py: the decoder's key/value cache.

References: `torch.cat` and indexing for the cache's own operations; the full (uncached)
forward pass of the model for incremental decoding (section 3.1: position t sees positions
<= t only, so decoding one position at a time must give the same outputs).
"""

import pytest
import torch

from transformer.model.cache import DecoderCache, LayerCache


def _kv(generator: torch.Generator, t: int, batch: int = 3) -> torch.Tensor:
    return torch.randn(batch, 2, t, 4, generator=generator)  # (B, H, t, Dk)


def test_append_self_concatenates_along_positions_and_counts_them():
    g = torch.Generator().manual_seed(0)
    cross_k, cross_v = _kv(g, 5), _kv(g, 5)
    layers = [LayerCache(cross_k, cross_v), LayerCache(cross_k, cross_v)]
    cache = DecoderCache(layers)
    assert cache.length == 0
    steps = [(_kv(g, n), _kv(g, n)) for n in (2, 1, 3)]
    for n, (k, v) in enumerate(steps, start=1):
        for layer in layers:
            all_k, all_v = layer.append_self(k, v)
        expected_k = torch.cat([k for k, _ in steps[:n]], dim=2)
        expected_v = torch.cat([v for _, v in steps[:n]], dim=2)
        assert torch.equal(all_k, expected_k) and torch.equal(all_v, expected_v)
        assert cache.length == expected_k.shape[2]
    assert layers[0].cross_k is cross_k and layers[0].cross_v is cross_v  # never changed


@pytest.mark.parametrize("decoded", [0, 3])
def test_reorder_equals_indexing_every_cached_tensor(decoded):
    g = torch.Generator().manual_seed(1)
    layers = [LayerCache(_kv(g, 5), _kv(g, 5)) for _ in range(2)]
    if decoded:
        for layer in layers:
            layer.append_self(_kv(g, decoded), _kv(g, decoded))
    before = [(layer.cross_k, layer.cross_v, layer.self_k, layer.self_v) for layer in layers]
    index = torch.tensor([2, 0, 0, 1])  # reorder, repeat and grow the batch, as beams do
    DecoderCache(layers).reorder(index)
    for layer, (cross_k, cross_v, self_k, self_v) in zip(layers, before, strict=True):
        assert torch.equal(layer.cross_k, cross_k[index])
        assert torch.equal(layer.cross_v, cross_v[index])
        if decoded:
            assert torch.equal(layer.self_k, self_k[index])
            assert torch.equal(layer.self_v, self_v[index])
        else:
            assert layer.self_k is None and layer.self_v is None


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_matches_full_forward(make_model, norm_first):
    model = make_model(60, dropout=0.0, norm_first=norm_first)
    src = torch.randint(4, 60, (3, 6))
    src[2, 3:] = 0
    tgt = torch.randint(4, 60, (3, 9))
    full = model(src, tgt)
    mask = src.eq(0)
    memory = model.encode(src, mask)
    cache = model.init_cache(memory)
    steps = [model.decode(tgt[:, t : t + 1], memory, mask, cache=cache) for t in range(9)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == 9


def test_cache_reorder_selects_rows(make_model):
    model = make_model(60, dropout=0.0)
    src = torch.randint(4, 60, (3, 6))
    tgt = torch.randint(4, 60, (3, 4))
    memory = model.encode(src)
    cache = model.init_cache(memory)
    model.decode(tgt[:, :2], memory, cache=cache)
    index = torch.tensor([2, 0, 0])
    cache.reorder(index)
    step = model.decode(tgt[index, 2:3], memory[index], cache=cache)
    torch.testing.assert_close(step, model(src[index], tgt[index, :3])[:, 2:3], atol=1e-5, rtol=0)
