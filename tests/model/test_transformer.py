"""Tests for transformer/model/transformer.py: parameter counts, causality, padding, tying.

The model config's own checks are in test_config.py, the decoder cache in test_cache.py.
"""

import io

import pytest
import torch

from transformer import ModelConfig, Transformer


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


def test_pre_norm_count_has_final_norms(make_model):
    count = sum(p.numel() for p in make_model(60, norm_first=True).parameters())
    assert count == closed_form_count(60, 32, 64, 2, norm_first=True)


def test_output_shape_and_default_masks(make_model):
    model = make_model(60, dropout=0.0)
    src = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])
    tgt_in = torch.tensor([[2, 10, 11], [2, 12, 0]])
    logits = model(src, tgt_in)
    assert logits.shape == (2, 3, 60)
    explicit = model(src, tgt_in, src_key_padding_mask=src.eq(0))
    torch.testing.assert_close(logits, explicit)


def test_causality(make_model):
    model = make_model(60, dropout=0.0)
    src = torch.randint(4, 60, (2, 6))
    tgt = torch.randint(4, 60, (2, 8))
    changed = tgt.clone()
    changed[:, 5:] = torch.randint(4, 60, (2, 3))
    a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :5], b[:, :5], atol=1e-6, rtol=0)
    assert not torch.allclose(a[:, 5:], b[:, 5:])


@pytest.mark.parametrize("norm_first", [False, True])
def test_padding_does_not_change_outputs(make_model, norm_first):
    model = make_model(60, dropout=0.0, norm_first=norm_first)
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
def test_all_padding_sentence_gives_finite_outputs_and_gradients(make_model, kernel):
    model = make_model(60, attention_kernel=kernel, dropout=0.1).train()
    src = torch.randint(4, 60, (3, 6))
    src[1] = 0
    tgt = torch.randint(4, 60, (3, 5))
    logits = model(src, tgt)
    assert torch.isfinite(logits).all()
    logits.float().logsumexp(-1).mean().backward()
    for name, p in model.named_parameters():
        assert torch.isfinite(p.grad).all(), name


def test_attention_kernels_agree_in_the_full_model(make_model):
    sdpa = make_model(60, dropout=0.0)
    math_model = make_model(60, seed=1, dropout=0.0, attention_kernel="math")
    math_model.load_state_dict(sdpa.state_dict())
    src = torch.randint(4, 60, (3, 7))
    src[0, 4:] = 0
    tgt = torch.randint(4, 60, (3, 5))
    assert (sdpa(src, tgt) - math_model(src, tgt)).abs().max() < 1e-5


def test_three_way_tying_survives_state_dict_round_trip(make_model):
    model = make_model(60)
    assert model.src_embed.weight is model.tgt_embed.weight is model.output_projection.weight
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    fresh = make_model(60, seed=1)
    fresh.load_state_dict(state)
    assert fresh.src_embed.weight is fresh.tgt_embed.weight is fresh.output_projection.weight
    torch.testing.assert_close(fresh.output_projection.weight, model.src_embed.weight)
    with torch.no_grad():
        fresh.src_embed.weight[5, 0] = 123.0
    assert fresh.output_projection.weight[5, 0] == 123.0


def test_separate_vocabularies(make_model):
    model = make_model(60, share_embeddings=False, tgt_vocab_size=40)
    assert model.src_embed.weight.shape == (60, 32)
    assert model.tgt_embed.weight is model.output_projection.weight
    assert model.tgt_embed.weight.shape == (40, 32)
    logits = model(torch.randint(4, 60, (2, 5)), torch.randint(4, 40, (2, 3)))
    assert logits.shape == (2, 3, 40)


def test_xavier_uniform_linear_layers(make_model):
    model = make_model(100, d_model=64, d_ff=256)
    weight = model.encoder.layers[0].feed_forward.linear1.weight
    bound = (6 / (64 + 256)) ** 0.5
    assert weight.abs().max() <= bound
    assert weight.abs().max() > 0.9 * bound


def test_empty_batches_and_empty_sources_do_not_crash(make_model):
    from transformer.decode.beam_search import beam_search
    from transformer.decode.greedy import greedy_search

    model = make_model(60, dropout=0.0)
    no_rows = torch.zeros(0, 5, dtype=torch.long)
    V = model.config.vocab_size
    assert model(no_rows, torch.zeros(0, 3, dtype=torch.long)).shape == (0, 3, V)
    assert greedy_search(model, no_rows) == [] and beam_search(model, no_rows) == []
    no_source = torch.zeros(2, 0, dtype=torch.long)  # sentences without source tokens
    logits = model(no_source, torch.full((2, 3), 4))
    assert logits.shape == (2, 3, V) and torch.isfinite(logits).all()
