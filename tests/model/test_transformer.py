"""Tests for transformer/model.py and ModelConfig: counts, causality, padding, tying, caching."""

import io

import pytest
import torch

from transformer import ModelConfig, Transformer


def small(**overrides) -> ModelConfig:
    values = dict(
        vocab_size=60,
        d_model=32,
        d_ff=64,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.0,
    )
    values.update(overrides)
    return ModelConfig(**values)


def closed_form_count(V: int, D: int, F: int, N: int, norm_first: bool = False) -> int:
    attention = 4 * (D * D + D)
    ffn = D * F + F + F * D + D
    layer_norm = 2 * D
    encoder_layer = attention + ffn + 2 * layer_norm
    decoder_layer = 2 * attention + ffn + 3 * layer_norm
    final_norms = 2 * layer_norm if norm_first else 0
    return V * D + N * (encoder_layer + decoder_layer) + final_norms


@pytest.mark.parametrize(
    "name, kwargs, paper_millions",
    [
        ("base", dict(), 65),
        ("big", dict(d_model=1024, d_ff=4096, n_heads=16, dropout=0.3), 213),
    ],
)
def test_parameter_count_matches_closed_form_and_table_3(name, kwargs, paper_millions):
    config = ModelConfig(vocab_size=37000, **kwargs)
    with torch.device("meta"):
        model = Transformer(config)
    count = sum(p.numel() for p in model.parameters())
    assert count == closed_form_count(37000, config.d_model, config.d_ff, 6)
    assert abs(count / (paper_millions * 1e6) - 1) < 0.04, (name, count)


def test_pre_norm_count_has_final_norms():
    config = small(norm_first=True)
    count = sum(p.numel() for p in Transformer(config).parameters())
    assert count == closed_form_count(60, 32, 64, 2, norm_first=True)


def test_output_shape_and_default_masks():
    model = Transformer(small()).eval()
    src = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])
    tgt_in = torch.tensor([[2, 10, 11], [2, 12, 0]])
    logits = model(src, tgt_in)
    assert logits.shape == (2, 3, 60)
    explicit = model(src, tgt_in, src_key_padding_mask=src.eq(0))
    torch.testing.assert_close(logits, explicit)


def test_causality():
    torch.manual_seed(0)
    model = Transformer(small()).eval()
    src = torch.randint(4, 60, (2, 6))
    tgt = torch.randint(4, 60, (2, 8))
    changed = tgt.clone()
    changed[:, 5:] = torch.randint(4, 60, (2, 3))
    a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :5], b[:, :5], atol=1e-6, rtol=0)
    assert not torch.allclose(a[:, 5:], b[:, 5:])


@pytest.mark.parametrize("norm_first", [False, True])
def test_padding_does_not_change_outputs(norm_first):
    torch.manual_seed(0)
    model = Transformer(small(norm_first=norm_first)).eval()
    src = torch.randint(4, 60, (1, 5))
    tgt = torch.randint(4, 60, (1, 4))
    alone = model(src, tgt)
    padded = model(torch.cat([src, torch.zeros(1, 3, dtype=torch.long)], 1), tgt)
    torch.testing.assert_close(padded, alone, atol=1e-5, rtol=1e-5)
    longer_src = torch.randint(4, 60, (1, 9))
    longer_tgt = torch.randint(4, 60, (1, 7))
    batch_src = torch.zeros(2, 9, dtype=torch.long)
    batch_src[0, :5], batch_src[1] = src[0], longer_src[0]
    batch_tgt = torch.zeros(2, 7, dtype=torch.long)
    batch_tgt[0, :4], batch_tgt[1] = tgt[0], longer_tgt[0]
    batched = model(batch_src, batch_tgt)
    torch.testing.assert_close(batched[:1, :4], alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kernel", ["sdpa", "math"])
def test_all_padding_sentence_gives_finite_outputs_and_gradients(kernel):
    torch.manual_seed(0)
    model = Transformer(small(attention_kernel=kernel, dropout=0.1)).train()
    src = torch.randint(4, 60, (3, 6))
    src[1] = 0
    tgt = torch.randint(4, 60, (3, 5))
    logits = model(src, tgt)
    assert torch.isfinite(logits).all()
    logits.float().logsumexp(-1).mean().backward()
    for name, p in model.named_parameters():
        assert torch.isfinite(p.grad).all(), name


def test_attention_kernels_agree_in_the_full_model():
    torch.manual_seed(0)
    sdpa = Transformer(small()).eval()
    math_model = Transformer(small(attention_kernel="math")).eval()
    math_model.load_state_dict(sdpa.state_dict())
    src = torch.randint(4, 60, (3, 7))
    src[0, 4:] = 0
    tgt = torch.randint(4, 60, (3, 5))
    assert (sdpa(src, tgt) - math_model(src, tgt)).abs().max() < 1e-5


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_matches_full_forward(norm_first):
    torch.manual_seed(0)
    model = Transformer(small(norm_first=norm_first)).eval()
    src = torch.randint(4, 60, (3, 6))
    src[2, 3:] = 0
    tgt = torch.randint(4, 60, (3, 9))
    full = model(src, tgt)
    mask = src.eq(0)
    memory = model.encode(src, mask)
    cache = model.init_cache(memory)
    steps = [model.decode(tgt[:, t : t + 1], memory, mask, cache=cache) for t in range(9)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_cache_reorder_selects_rows():
    torch.manual_seed(0)
    model = Transformer(small()).eval()
    src = torch.randint(4, 60, (3, 6))
    tgt = torch.randint(4, 60, (3, 4))
    memory = model.encode(src)
    cache = model.init_cache(memory)
    model.decode(tgt[:, :2], memory, cache=cache)
    index = torch.tensor([2, 0, 0])
    cache.reorder(index)
    step = model.decode(tgt[index, 2:3], memory[index], cache=cache)
    torch.testing.assert_close(step, model(src[index], tgt[index, :3])[:, 2:3], atol=1e-5, rtol=0)


def test_three_way_tying_survives_state_dict_round_trip():
    model = Transformer(small())
    assert model.src_embed.weight is model.tgt_embed.weight is model.output_projection.weight
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    fresh = Transformer(small())
    fresh.load_state_dict(state)
    assert fresh.src_embed.weight is fresh.tgt_embed.weight is fresh.output_projection.weight
    torch.testing.assert_close(fresh.output_projection.weight, model.src_embed.weight)
    with torch.no_grad():
        fresh.src_embed.weight[5, 0] = 123.0
    assert fresh.output_projection.weight[5, 0] == 123.0


def test_separate_vocabularies():
    model = Transformer(small(share_embeddings=False, tgt_vocab_size=40))
    assert model.src_embed.weight.shape == (60, 32)
    assert model.tgt_embed.weight is model.output_projection.weight
    assert model.tgt_embed.weight.shape == (40, 32)
    logits = model(torch.randint(4, 60, (2, 5)), torch.randint(4, 40, (2, 3)))
    assert logits.shape == (2, 3, 40)


def test_xavier_uniform_linear_layers():
    model = Transformer(ModelConfig(vocab_size=100, d_model=64, d_ff=256, n_heads=4))
    weight = model.encoder.layers[0].feed_forward.linear1.weight
    bound = (6 / (64 + 256)) ** 0.5
    assert weight.abs().max() <= bound
    assert weight.abs().max() > 0.9 * bound


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d_model=500), r"d_model \(500\) must be divisible by n_heads \(8\)"),
        (dict(dropout=1.5), r"dropout \(1.5\)"),
        (dict(n_encoder_layers=0), r"n_encoder_layers \(0\)"),
        (dict(pad_id=1), "distinct"),
        (dict(attention_kernel="flash"), "attention_kernel"),
        (dict(tgt_vocab_size=50), "share_embeddings"),
    ],
)
def test_invalid_config_names_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**kwargs)


def test_empty_batches_and_empty_sources_do_not_crash():
    from transformer.decode.beam_search import beam_search
    from transformer.decode.greedy import greedy_search

    model = Transformer(small()).eval()
    no_rows = torch.zeros(0, 5, dtype=torch.long)
    V = model.config.vocab_size
    assert model(no_rows, torch.zeros(0, 3, dtype=torch.long)).shape == (0, 3, V)
    assert greedy_search(model, no_rows) == [] and beam_search(model, no_rows) == []
    no_source = torch.zeros(2, 0, dtype=torch.long)  # sentences without source tokens
    logits = model(no_source, torch.full((2, 3), 4))
    assert logits.shape == (2, 3, V) and torch.isfinite(logits).all()
