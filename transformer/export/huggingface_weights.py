"""Our weights under Hugging Face `MarianMTModel`'s names, with the d_model axis reordered.

Marian computes the paper's sinusoids (same frequencies, positions from 0) but stores them in
two halves: features 0 .. D/2 - 1 hold the sines, D/2 .. D - 1 the cosines, where ours
interleave them (sine at 2i, cosine at 2i + 1; `transformer.model.positional_encoding`).
Marian's positions are computed, not loaded, so the model is reordered instead: every vector
of width D (embeddings, residual stream) is permuted by P = [0, 2, 4, ..., 1, 3, 5, ...], i.e.
Marian's feature j is our feature P[j]. Then Marian's position table is ours permuted, and
permuting every weight consistently leaves every output unchanged:

- embeddings (V, D): columns permuted, E[:, P]; the tied output projection then gives the same
  logits, (h[P]) . (E[:, P]) = h . E;
- a linear layer reading the residual stream (q, k, v projections, the first feed-forward
  layer): input columns permuted, W[:, P];
- a linear layer writing it (attention output, second feed-forward layer): output rows and
  bias permuted, W[P, :], b[P];
- LayerNorm: gain and bias permuted (its mean and variance do not depend on feature order).

Attention heads and the feed-forward inner width F are untouched: only D is reordered.

Source: `MarianSinusoidalPositionalEmbedding` and the Marian layer names in Hugging Face
transformers (`models/marian/modeling_marian.py`); the mapping is ours.
"""

from __future__ import annotations

import torch


def halves_permutation(d_model: int) -> torch.Tensor:
    """P with Marian's feature j = our feature P[j]: the even features, then the odd ones.

    Args:
        d_model: Width D (even).

    Returns:
        Long tensor (D,): [0, 2, ..., D - 2, 1, 3, ..., D - 1].

    Raises:
        ValueError: for an odd D (Marian's halves and our interleaving then disagree on the
            last feature).
    """
    if d_model % 2:
        raise ValueError(f"d_model ({d_model}) must be even for the Hugging Face export")
    return torch.cat((torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)))


def _reads(linear, order: torch.Tensor) -> dict[str, torch.Tensor]:
    """A linear layer whose input is the residual stream: columns reordered."""
    return {"weight": linear.weight[:, order], "bias": linear.bias}


def _writes(linear, order: torch.Tensor) -> dict[str, torch.Tensor]:
    """A linear layer whose output is the residual stream: rows and bias reordered."""
    return {"weight": linear.weight[order, :], "bias": linear.bias[order]}


def _norm(norm, order: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"weight": norm.weight[order], "bias": norm.bias[order]}


def _attention(attention, order: torch.Tensor) -> dict[str, dict[str, torch.Tensor]]:
    return {
        "q_proj": _reads(attention.q_proj, order),
        "k_proj": _reads(attention.k_proj, order),
        "v_proj": _reads(attention.v_proj, order),
        "out_proj": _writes(attention.out_proj, order),
    }


def _flatten(prefix: str, tree: dict) -> dict[str, torch.Tensor]:
    flat = {}
    for name, value in tree.items():
        key = f"{prefix}.{name}" if prefix else name
        flat.update(_flatten(key, value) if isinstance(value, dict) else {key: value})
    return flat


def marian_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Our post-norm `Transformer`'s weights as a `MarianMTModel` state dict, d_model reordered.

    Args:
        model: Our `Transformer` with `norm_first=False` (Marian is post-norm).

    Returns:
        float32 CPU tensors under Marian's names: `model.shared.weight` (shared vocabulary) or
        `model.encoder.embed_tokens.weight` and `model.decoder.embed_tokens.weight`, every
        layer's projections and norms, `lm_head.weight` (the tied target embedding) and a zero
        `final_logits_bias`. Positions are absent: Marian computes them.

    Raises:
        ValueError: for a pre-norm model or an odd d_model.
    """
    config = model.config
    if config.norm_first:
        raise ValueError("MarianMTModel is post-norm; this model is pre-norm (norm_first)")
    order = halves_permutation(config.d_model)
    with torch.no_grad():
        tree: dict = {"model": {"encoder": {"layers": {}}, "decoder": {"layers": {}}}}
        encoder, decoder = tree["model"]["encoder"], tree["model"]["decoder"]
        target = model.tgt_embed.weight[:, order]  # (V, D) -> (V, D), columns reordered
        if config.share_embeddings:
            tree["model"]["shared"] = {"weight": target}
        else:
            encoder["embed_tokens"] = {"weight": model.src_embed.weight[:, order]}
            decoder["embed_tokens"] = {"weight": target}
        for i, layer in enumerate(model.encoder.layers):
            encoder["layers"][str(i)] = {
                "self_attn": _attention(layer.self_attn, order),
                "self_attn_layer_norm": _norm(layer.norm1, order),
                "fc1": _reads(layer.feed_forward.linear1, order),
                "fc2": _writes(layer.feed_forward.linear2, order),
                "final_layer_norm": _norm(layer.norm2, order),
            }
        for i, layer in enumerate(model.decoder.layers):
            decoder["layers"][str(i)] = {
                "self_attn": _attention(layer.self_attn, order),
                "self_attn_layer_norm": _norm(layer.norm1, order),
                "encoder_attn": _attention(layer.cross_attn, order),
                "encoder_attn_layer_norm": _norm(layer.norm2, order),
                "fc1": _reads(layer.feed_forward.linear1, order),
                "fc2": _writes(layer.feed_forward.linear2, order),
                "final_layer_norm": _norm(layer.norm3, order),
            }
        tree["lm_head"] = {"weight": target}
        tree["final_logits_bias"] = torch.zeros(1, config.target_vocab_size)
        flat = _flatten("", tree)
        return {key: value.detach().to("cpu", torch.float32).clone() for key, value in flat.items()}
