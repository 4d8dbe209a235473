"""Scaled dot-product and multi-head attention (Vaswani et al., 2017, section 3.2).

Masks come in torch.nn.MultiheadAttention's conventions: a bool mask is True where a key may
NOT be attended; a float mask is added to the attention scores (0 = attended, -inf = not
attended, other values are biases). This module is the one place where they are combined into
the one additive float mask that both kernels add to the scores (so the "True = may attend"
convention of `torch.nn.functional.scaled_dot_product_attention`'s bool masks is never used).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from transformer.model.config import ATTENTION_KERNELS


def _attention_bias(
    key_padding_mask: torch.Tensor | None,
    attn_mask: torch.Tensor | None,
    query_length: int,
    key_length: int,
    is_causal: bool,
    device: torch.device,
) -> torch.Tensor | None:
    """Combine the masks into one additive mask for the scores, or None when nothing is masked.

    A bool mask (True = not attended) becomes -inf there and 0 elsewhere; a float mask is
    already additive and is added as it is, as torch.nn.MultiheadAttention does.

    Shape:
        key_padding_mask: (B, S). attn_mask: (T, S) or (B, T, S).
        output: (B or 1, 1, T or 1, S) float32, added to the (B, H, T, S) scores.

    Raises:
        ValueError: for a mask that is neither bool nor float (torch.nn refuses those too), or
            a float mask of only 0s and 1s (a bool mask cast to float would add 1 to the
            scores instead of masking them), naming the argument and its dtype. The 0/1 test
            reads a float mask's values (a host sync); bool masks, the ones this package
            passes, are not read.
    """
    masks = {}
    if key_padding_mask is not None:
        masks["key_padding_mask"] = key_padding_mask[:, None, None, :]  # (B, S) -> (B, 1, 1, S)
    if attn_mask is not None:
        masks["attn_mask"] = attn_mask[None, None] if attn_mask.dim() == 2 else attn_mask[:, None]
        # (T, S) -> (1, 1, T, S) or (B, T, S) -> (B, 1, T, S)
    if is_causal and masks:
        future = torch.ones(query_length, key_length, dtype=torch.bool, device=device).triu(1)
        masks["is_causal"] = future  # (T, S), True above the diagonal
    bias = None
    for name, mask in masks.items():
        if mask.dtype == torch.bool:
            mask = torch.zeros(mask.shape, device=device).masked_fill(mask, float("-inf"))
        elif not mask.is_floating_point():
            raise ValueError(
                f"{name} has dtype {mask.dtype}; attention masks must be bool (True = not "
                "attended) or float (added to the scores: 0 = attended, -inf = not attended)"
            )
        elif bool(mask.eq(1).any()) and bool((mask.eq(0) | mask.eq(1)).all()):
            raise ValueError(
                f"{name} is a {mask.dtype} mask of 0s and 1s, which would add 1 to the scores "
                "rather than mask them; pass a bool mask (True = not attended) or an additive "
                "float mask (0 = attended, -inf = not attended)"
            )
        bias = mask.float() if bias is None else bias + mask.float()  # -> (B|1, 1, T|1, S)
    return bias


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V, written out (equation 1).

    M is the additive mask (none in the paper's equation; -inf where a key is masked). The
    reading kernel; `MultiHeadAttention` uses torch's fused kernel by default, which gives the
    same result (within 1e-5 in float32). Scores, mask and softmax are in float32. A row with
    no attendable key (all -inf) gets zero weights.

    Args:
        q, k, v: Per-head queries, keys and values.
        attn_mask: M, added to the scores: 0 = may attend, -inf = may not, other values are
            biases; None adds nothing.
        is_causal: Forbid keys after the query (only when `attn_mask` is None).
        dropout_p: Dropout on the attention weights.

    Returns:
        (output, weights).

    Shape:
        q: (B, H, T, Dk). k, v: (B, H, S, Dk). attn_mask: float, broadcastable to (B, H, T, S).
        output: (B, H, T, Dk). weights: (B, H, T, S).
    """
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).float()
    # (B, H, T, Dk) @ (B, H, Dk, S) -> (B, H, T, S)
    if is_causal and attn_mask is None:
        attn_mask = torch.full(scores.shape[-2:], float("-inf"), device=q.device).triu(1)
        # (T, S): -inf above the diagonal, 0 elsewhere
    if attn_mask is not None:
        scores = scores + attn_mask
    weights = torch.softmax(scores, dim=-1).to(q.dtype)
    if attn_mask is not None:
        # A row whose keys are all masked is all -inf, so softmax gives NaN: use zeros instead.
        weights = weights.masked_fill(attn_mask.eq(float("-inf")).all(-1, keepdim=True), 0.0)
    weights = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return weights @ v, weights  # (B, H, T, S) @ (B, H, S, Dk) -> (B, H, T, Dk)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O (section 3.2.2).

    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V); the h per-head projections are stored as one
    (D, D) matrix each (`q_proj`, `k_proj`, `v_proj`), split into H heads of d_k = D / H.

    Two interchangeable kernels compute equation 1: "sdpa" calls
    `torch.nn.functional.scaled_dot_product_attention` (fused) and "math" runs the written-out
    `scaled_dot_product_attention` above. "auto" (the default) takes "math" for bf16/fp16
    tensors on the CPU, where the fused kernel's backward pass is slow (BENCHMARKS.md), and
    "sdpa" otherwise. With `need_weights=True` the math kernel is used, so the returned weights are
    the ones that produced the output.

    Masks follow torch.nn.MultiheadAttention: bool (True = not attended) or float (added to
    the scores). A query row whose keys are all masked (an all-padding sentence) yields a zero
    output and zero weights, never NaN, in the forward and backward pass.

    Args:
        d_model: Width D.
        n_heads: Number of heads H (D must be divisible by H).
        dropout: Dropout on the attention weights (0 in the paper).
        kernel: "auto", "sdpa" or "math".

    Raises:
        ValueError: when d_model is not divisible by n_heads or the kernel is unknown; in
            `forward`, for a mask that is neither bool nor float or a float mask of 0s and 1s.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        kernel: str = "auto",
    ):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        if kernel not in ATTENTION_KERNELS:
            raise ValueError(
                f"attention kernel ({kernel!r}) must be one of {', '.join(ATTENTION_KERNELS)}"
            )
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.dropout = dropout
        self.kernel = kernel
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def uses_math_kernel(self, q: torch.Tensor) -> bool:
        """Whether equation 1 is computed written out for these queries (see the class doc)."""
        if self.kernel != "auto":
            return self.kernel == "math"
        return q.device.type == "cpu" and q.dtype in (torch.bfloat16, torch.float16)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, D) -> (B, H, L, Dk)."""
        B, L, _ = x.shape
        return x.view(B, L, self.n_heads, self.d_k).transpose(1, 2)  # (B, L, D) -> (B, H, L, Dk)

    def project_kv(
        self, key: torch.Tensor, value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-head keys K W^K and values V W^V, (B, S, D) -> (B, H, S, Dk) each (for caching)."""
        return self.split_heads(self.k_proj(key)), self.split_heads(self.v_proj(value))

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        key_padding_mask: torch.Tensor | None = None,
        attn_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        projected_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from `query` to `key`/`value`.

        Args:
            query: Queries.
            key, value: Keys and values (ignored when `projected_kv` is given).
            key_padding_mask: Which keys are padding: bool, True = not attended; or float,
                added to the scores of that key (0 = attended, -inf = not attended).
            attn_mask: Which keys each query may attend: bool, True = not attended; or float,
                added to the scores (0 = attended, -inf = not attended, other values biases).
            is_causal: Also forbid keys after each query (square self-attention).
            need_weights: Also return the attention weights.
            projected_kv: Already projected per-head (K, V), e.g. from a decoder cache.

        Returns:
            (output, weights) with weights None unless `need_weights`.

        Shape:
            query: (B, T, D). key, value: (B, S, D).
            key_padding_mask: (B, S) bool (True at padding, not attended) or float (added).
            attn_mask: (T, S) or (B, T, S), the same for every head; bool (True = not
            attended) or float (added to the scores). projected_kv: two (B, H, S, Dk).
            output: (B, T, D). weights: (B, H, T, S), zero in rows with no attendable key.

        Raises:
            ValueError: for a mask that is neither bool nor float, or a float mask of only 0s
                and 1s (use a bool mask or 0 / -inf), naming the argument and its dtype.
        """
        B, T, _ = query.shape
        q = self.split_heads(self.q_proj(query))  # (B, T, D) -> (B, H, T, Dk)
        k, v = projected_kv if projected_kv is not None else self.project_kv(key, value)
        S = k.shape[2]
        bias = _attention_bias(key_padding_mask, attn_mask, T, S, is_causal, query.device)
        # None or (B|1, 1, T|1, S), float32
        empty_rows = None
        if bias is not None:
            empty_rows = bias.eq(float("-inf")).all(-1, keepdim=True)  # (B|1, 1, T|1, 1)
            # rows with no key to attend: attend anything there, then zero the result below
            bias = bias.masked_fill(empty_rows, 0.0)
        dropout_p = self.dropout if self.training else 0.0
        weights = None
        if self.uses_math_kernel(q) or need_weights:
            out, weights = scaled_dot_product_attention(
                q, k, v, bias, is_causal and bias is None, dropout_p
            )
        else:
            out = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=None if bias is None else bias.to(q.dtype),  # a float mask is added
                dropout_p=dropout_p,
                is_causal=is_causal and bias is None,
            )  # (B, H, T, Dk)
        out = self.out_proj(out.transpose(1, 2).reshape(B, T, self.n_heads * self.d_k))
        # (B, H, T, Dk) -> (B, T, D); D spelled out so that empty batches reshape too
        if empty_rows is not None:
            out = out.masked_fill(empty_rows[:, 0], 0.0)  # (B|1, T|1, 1) broadcast over D
            if weights is not None:
                weights = weights.masked_fill(empty_rows, 0.0)
        return out, weights
