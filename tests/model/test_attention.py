"""Tests for transformer/model/attention.py against torch.nn.MultiheadAttention and equation 1."""

import math

import pytest
import torch

from transformer.model import attention as attention_module
from transformer.model.attention import MultiHeadAttention, scaled_dot_product_attention

B, T, S, D, H = 3, 5, 7, 32, 4


@pytest.fixture
def model_and_reference(copy_attention):
    """`model_and_reference(kernel, d_model=D, n_heads=H)` -> our attention with random
    weights (non-zero biases, so a bias mix-up would show) and a torch.nn.MultiheadAttention
    holding the same weights, both in eval mode."""

    def build(kernel: str, d_model: int = D, n_heads: int = H):
        torch.manual_seed(0)
        ours = MultiHeadAttention(d_model, n_heads, kernel=kernel).eval()
        for p in ours.parameters():
            torch.nn.init.normal_(p, std=0.2)
        ref = torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        copy_attention(ours, ref)
        return ours, ref.eval()

    return build


@pytest.mark.parametrize("kernel", ["sdpa", "math"])
def test_matches_torch_multihead_attention(model_and_reference, kernel):
    ours, ref = model_and_reference(kernel)
    q, kv = torch.randn(3, 5, 32), torch.randn(3, 7, 32)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 4:] = True
    out, weights = ours(q, kv, kv, key_padding_mask=pad, need_weights=True)
    ref_out, ref_weights = ref(q, kv, kv, key_padding_mask=pad, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, ref_weights, atol=1e-6, rtol=1e-5)


def _random_mask(shape: tuple[int, ...], kind: str, seed: int) -> torch.Tensor:
    """A mask in torch.nn's conventions: bool (True = not attended), or additive float holding
    -inf where masked, a large finite -1e9 and random finite biases (e.g. learned ones)."""
    generator = torch.Generator().manual_seed(seed)
    masked = torch.rand(shape, generator=generator) < 0.3
    masked[..., 0] = False  # every query keeps a key: torch.nn gives NaN for an all-masked row
    if kind == "bool":
        return masked
    bias = torch.randn(shape, generator=generator)
    bias[..., 1] = -1e9
    return bias.masked_fill(masked, float("-inf"))


def _assert_matches_reference(ours, ref, query, kv, masks: dict, ref_masks: dict, **kwargs):
    """Our output (with the module's kernel) and weights (need_weights) equal torch.nn's."""
    out, _ = ours(query, kv, kv, **masks, **kwargs)
    _, weights = ours(query, kv, kv, **masks, need_weights=True, **kwargs)
    ref_out, ref_weights = ref(query, kv, kv, **ref_masks, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, ref_weights, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("kernel", ["sdpa", "math"])
@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize(
    "argument", ["key_padding_mask", "attn_mask (T, S)", "attn_mask (B, T, S)"]
)
def test_bool_and_additive_float_masks_match_torch_multihead_attention(
    model_and_reference, kernel, kind, argument
):
    ours, ref = model_and_reference(kernel)
    query, kv = torch.randn(B, T, D), torch.randn(B, S, D)
    if argument == "key_padding_mask":
        mask = _random_mask((B, S), kind, seed=1)
        masks = ref_masks = {"key_padding_mask": mask}
    elif argument == "attn_mask (T, S)":
        mask = _random_mask((T, S), kind, seed=2)
        masks = ref_masks = {"attn_mask": mask}
    else:  # ours takes one mask per sentence; torch.nn one per sentence and head, (B*H, T, S)
        mask = _random_mask((B, T, S), kind, seed=3)
        masks, ref_masks = {"attn_mask": mask}, {"attn_mask": mask.repeat_interleave(H, dim=0)}
    _assert_matches_reference(ours, ref, query, kv, masks, ref_masks)


def _additive(mask: torch.Tensor) -> torch.Tensor:
    """The float twin of a bool mask: -inf where True, 0 elsewhere."""
    return torch.zeros(mask.shape).masked_fill(mask, float("-inf"))


@pytest.mark.parametrize("kernel", ["sdpa", "math"])
def test_float_mask_combines_with_is_causal_and_with_a_bool_padding_mask(
    model_and_reference, kernel
):
    ours, ref = model_and_reference(kernel)
    x, kv = torch.randn(B, T, D), torch.randn(B, S, D)
    bias = _random_mask((T, T), "float", seed=4)
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    _assert_matches_reference(
        ours,
        ref,
        x,
        x,
        {"attn_mask": bias},
        {"attn_mask": bias + _additive(causal)},
        is_causal=True,
    )
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[1, 4:] = True
    pad[2, 6:] = True
    bias = _random_mask((B, T, S), "float", seed=5)
    _assert_matches_reference(
        ours,
        ref,
        x,
        kv,
        {"attn_mask": bias, "key_padding_mask": pad},
        {"attn_mask": bias.repeat_interleave(H, dim=0), "key_padding_mask": _additive(pad)},
    )
    bool_mask = _random_mask((T, S), "bool", seed=6)
    float_pad = _random_mask((B, S), "float", seed=7)
    _assert_matches_reference(
        ours,
        ref,
        x,
        kv,
        {"attn_mask": bool_mask, "key_padding_mask": float_pad},
        {"attn_mask": _additive(bool_mask), "key_padding_mask": float_pad},
    )


@pytest.mark.parametrize("kernel", ["sdpa", "math"])
def test_learned_additive_bias_gets_torch_multihead_attentions_gradient(
    model_and_reference, kernel
):
    ours, ref = model_and_reference(kernel)
    query, kv = torch.randn(B, T, D), torch.randn(B, S, D)
    bias = _random_mask((T, S), "float", seed=8).clamp(min=-5.0).requires_grad_()
    ref_bias = bias.detach().clone().requires_grad_()
    ours(query, kv, kv, attn_mask=bias)[0].square().sum().backward()
    ref(query, kv, kv, attn_mask=ref_bias)[0].square().sum().backward()
    torch.testing.assert_close(bias.grad, ref_bias.grad, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "argument, mask, message",
    [
        (
            "key_padding_mask",
            torch.zeros(B, S, dtype=torch.long),
            "key_padding_mask has dtype torch.int64",
        ),
        ("attn_mask", torch.zeros(T, S, dtype=torch.int32), "attn_mask has dtype torch.int32"),
        (
            "key_padding_mask",
            torch.eye(B, S),
            "key_padding_mask is a torch.float32 mask of 0s and 1s",
        ),
        (
            "attn_mask",
            torch.ones(B, T, S, dtype=torch.float64),
            "attn_mask is a torch.float64 mask of 0s",
        ),
    ],
)
@pytest.mark.parametrize("kernel", ["sdpa", "math"])
def test_integer_and_zero_one_float_masks_are_refused(kernel, argument, mask, message):
    attn = MultiHeadAttention(D, H, kernel=kernel)
    query, kv = torch.randn(B, T, D), torch.randn(B, S, D)
    with pytest.raises(ValueError, match=message):
        attn(query, kv, kv, **{argument: mask})


def test_equation_1_adds_a_float_mask_to_the_scores():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    bias = torch.randn(2, 1, 4, 6)
    bias[0, 0, 1, 2:] = float("-inf")
    out, weights = scaled_dot_product_attention(q, k, v, bias)
    scores = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(8) + bias
    expected_weights = scores.exp() / scores.exp().sum(-1, keepdim=True)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(out, torch.einsum("bhts,bhsd->bhtd", expected_weights, v))


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
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_all_masked_rows_give_zeros_without_nan(kernel, kind):
    torch.manual_seed(0)
    attn = MultiHeadAttention(16, 2, kernel=kernel)
    x = torch.randn(2, 4, 16, requires_grad=True)
    pad = torch.zeros(2, 4, dtype=torch.bool)
    pad[1] = True  # the second sentence is all padding
    if kind == "float":
        pad = _additive(pad)  # 0 / -inf: the second sentence's keys are all -inf
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
