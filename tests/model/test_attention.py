"""Tests for transformer/attention.py against torch.nn.MultiheadAttention and equation 1."""

import math

import pytest
import torch

from transformer.model import attention as attention_module
from transformer.model.attention import MultiHeadAttention, scaled_dot_product_attention


def _copy_into_torch(ours: MultiHeadAttention, d_model: int, n_heads: int):
    ref = torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
        )
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ref.eval()


@pytest.mark.parametrize("kernel", ["sdpa", "math"])
def test_matches_torch_multihead_attention(kernel):
    torch.manual_seed(0)
    ours = MultiHeadAttention(32, 4, kernel=kernel).eval()
    for p in ours.parameters():  # non-zero biases, so a bias mix-up would show
        torch.nn.init.normal_(p, std=0.2)
    ref = _copy_into_torch(ours, 32, 4)
    q, kv = torch.randn(3, 5, 32), torch.randn(3, 7, 32)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 4:] = True
    out, weights = ours(q, kv, kv, key_padding_mask=pad, need_weights=True)
    ref_out, ref_weights = ref(q, kv, kv, key_padding_mask=pad, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, ref_weights, atol=1e-6, rtol=1e-5)


def test_equation_1_closed_form():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    out, weights = scaled_dot_product_attention(q, k, v)
    scores = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(8)
    expected_weights = scores.exp() / scores.exp().sum(-1, keepdim=True)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(out, torch.einsum("bhts,bhsd->bhtd", expected_weights, v))


@pytest.mark.parametrize("causal", [False, True])
def test_kernels_agree(causal):
    torch.manual_seed(1)
    sdpa = MultiHeadAttention(64, 8, kernel="sdpa").eval()
    math_kernel = MultiHeadAttention(64, 8, kernel="math").eval()
    math_kernel.load_state_dict(sdpa.state_dict())
    x = torch.randn(4, 9, 64)
    pad = torch.zeros(4, 9, dtype=torch.bool)
    pad[2, 6:] = True
    for mask in (None, pad):
        a, _ = sdpa(x, x, x, key_padding_mask=mask, is_causal=causal)
        b, _ = math_kernel(x, x, x, key_padding_mask=mask, is_causal=causal)
        assert (a - b).abs().max() < 1e-5


def test_causal_weights_are_zero_above_diagonal():
    attn = MultiHeadAttention(16, 2).eval()
    x = torch.randn(2, 5, 16)
    _, weights = attn(x, x, x, is_causal=True, need_weights=True)
    assert torch.all(weights.triu(1) == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 5))


@pytest.mark.parametrize("kernel", ["sdpa", "math"])
def test_all_masked_rows_give_zeros_without_nan(kernel):
    torch.manual_seed(0)
    attn = MultiHeadAttention(16, 2, kernel=kernel)
    x = torch.randn(2, 4, 16, requires_grad=True)
    pad = torch.zeros(2, 4, dtype=torch.bool)
    pad[1] = True  # the second sentence is all padding
    out, weights = attn(x, x, x, key_padding_mask=pad, need_weights=True)
    assert torch.all(out[1] == 0)
    assert torch.all(weights[1] == 0)
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in attn.parameters())


def test_rejects_indivisible_heads():
    with pytest.raises(ValueError, match=r"d_model \(30\) must be divisible by n_heads \(4\)"):
        MultiHeadAttention(30, 4)


@pytest.mark.parametrize(
    "kernel, dtype, expect_math",
    [
        ("auto", torch.float32, False),
        ("auto", torch.bfloat16, True),
        ("auto", torch.float16, True),
        ("sdpa", torch.bfloat16, False),
        ("math", torch.float32, True),
    ],
)
def test_auto_kernel_takes_math_for_half_precision_on_cpu(kernel, dtype, expect_math, monkeypatch):
    attn = MultiHeadAttention(16, 2, kernel=kernel).eval().to(dtype)
    calls = []
    original = attention_module.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(attention_module, "scaled_dot_product_attention", spy)
    x = torch.randn(2, 5, 16, dtype=dtype)
    out, _ = attn(x, x, x)
    assert out.dtype == dtype
    assert bool(calls) == expect_math
    assert attn.uses_math_kernel(x) == expect_math
