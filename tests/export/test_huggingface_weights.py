"""Tests for transformer/export/huggingface_weights.py: the d_model reordering that turns our
interleaved sinusoids into Marian's two halves, leaving every output unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from transformer.export.huggingface_weights import halves_permutation, marian_state_dict
from transformer.model.positional_encoding import sinusoidal_table


def marian_sinusoids(n_pos: int, dim: int) -> np.ndarray:
    """Marian's table written out from its definition: angle pos / 10000^(2 (j // 2) / dim),
    sines of the even j in the first half, cosines of the odd j in the second."""
    angles = np.array(
        [[pos / 10000 ** (2 * (j // 2) / dim) for j in range(dim)] for pos in range(n_pos)]
    )
    return np.concatenate([np.sin(angles[:, 0::2]), np.cos(angles[:, 1::2])], axis=1)


def test_the_permutation_takes_the_even_features_then_the_odd_ones():
    assert halves_permutation(6).tolist() == [0, 2, 4, 1, 3, 5]
    with pytest.raises(ValueError, match="even"):
        halves_permutation(7)


def test_our_table_reordered_is_marians_table():
    order = halves_permutation(16)
    ours = sinusoidal_table(torch.arange(50), 16)[:, order]  # (50, 16) -> (50, 16), reordered
    np.testing.assert_allclose(ours.numpy(), marian_sinusoids(50, 16), atol=1e-6)


def reorder_in_place(model, order: torch.Tensor) -> None:
    """Reorder our own model's d_model axis by `order`, by the module docstring's rules, the
    position table with it (written here independently of `marian_state_dict`)."""
    with torch.no_grad():
        model.src_embed.weight.copy_(model.src_embed.weight[:, order])
        model.positional_encoding.table.copy_(model.positional_encoding.table[:, order])
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.copy_(module.weight[order])
                module.bias.copy_(module.bias[order])
        layers = [*model.encoder.layers, *model.decoder.layers]
        attentions = [layer.self_attn for layer in layers]
        attentions += [layer.cross_attn for layer in model.decoder.layers]
        readers = [a.q_proj for a in attentions] + [a.k_proj for a in attentions]
        readers += [a.v_proj for a in attentions] + [x.feed_forward.linear1 for x in layers]
        writers = [a.out_proj for a in attentions] + [x.feed_forward.linear2 for x in layers]
        for linear in readers:
            linear.weight.copy_(linear.weight[:, order])
        for linear in writers:
            linear.weight.copy_(linear.weight[order, :])
            linear.bias.copy_(linear.bias[order])


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_reordering_every_weight_leaves_the_logits_unchanged(norm_first, make_model, random_batch):
    model = make_model(50, dropout=0.0, norm_first=norm_first)
    src = random_batch(0, 50, [7, 4, 6])
    tgt_in = random_batch(1, 50, [5, 5, 3])
    expected = model(src, tgt_in)
    reorder_in_place(model, halves_permutation(model.config.d_model))
    torch.testing.assert_close(model(src, tgt_in), expected, atol=1e-5, rtol=1e-5)


def test_the_exported_weights_are_ours_reordered(make_model):
    model = make_model(50)
    order = halves_permutation(32)
    weights = marian_state_dict(model)
    layer = model.decoder.layers[1]
    prefix = "model.decoder.layers.1"
    assert torch.equal(weights["model.shared.weight"], model.tgt_embed.weight[:, order])
    assert torch.equal(
        weights[f"{prefix}.encoder_attn.k_proj.weight"], layer.cross_attn.k_proj.weight[:, order]
    )
    assert torch.equal(
        weights[f"{prefix}.encoder_attn.out_proj.bias"], layer.cross_attn.out_proj.bias[order]
    )
    assert torch.equal(weights[f"{prefix}.fc2.weight"], layer.feed_forward.linear2.weight[order])
    assert torch.equal(weights[f"{prefix}.fc1.bias"], layer.feed_forward.linear1.bias)
    assert torch.equal(
        weights[f"{prefix}.encoder_attn_layer_norm.weight"], layer.norm2.weight[order]
    )
    assert torch.equal(weights[f"{prefix}.final_layer_norm.bias"], layer.norm3.bias[order])


def test_names_and_shapes_are_marians(make_model):
    model = make_model(40, n_encoder_layers=1, n_decoder_layers=1)
    weights = marian_state_dict(model)
    assert weights["model.shared.weight"].shape == (40, 32)
    assert torch.equal(weights["lm_head.weight"], weights["model.shared.weight"])
    assert weights["model.decoder.layers.0.fc1.weight"].shape == (64, 32)
    assert weights["model.decoder.layers.0.fc2.weight"].shape == (32, 64)
    assert weights["final_logits_bias"].shape == (1, 40) and not weights["final_logits_bias"].any()
    assert not any("embed_positions" in key for key in weights)
    separate = marian_state_dict(make_model(40, share_embeddings=False))
    assert "model.shared.weight" not in separate
    assert torch.equal(separate["lm_head.weight"], separate["model.decoder.embed_tokens.weight"])


def test_a_pre_norm_model_is_refused(make_model):
    with pytest.raises(ValueError, match="post-norm"):
        marian_state_dict(make_model(40, norm_first=True))
