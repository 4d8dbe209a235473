"""Attention maps: the weights every head used for one sentence pair, and heatmaps of them.

The paper shows what attention does with heatmaps of the weights softmax(Q K^T / sqrt(d_k))
(section 3.2.1, equation 1; Figures 3 to 5). This module collects those weights from a trained
`Transformer` without changing it: a forward pre-hook on each `MultiHeadAttention` switches on
`need_weights` (the layers always pass it as a keyword) and a forward hook keeps the returned
(B, H, T, S) weights (`transformer.decode.alignment.capture_weights`, which word alignments
use too). With `need_weights` an attention module runs its written-out "math" kernel,
which matches the default fused kernel within 1e-5 in float32, so the weights collected are the
ones that produced the layer's output.

Three kinds of attention (section 3.2.3):
- "self": encoder self-attention, source tokens attending source tokens.
- "cross": encoder-decoder attention, target positions attending source tokens.
- "decoder-self": masked decoder self-attention, target positions attending earlier ones.

Heatmaps of these weights are drawn by `transformer.evaluate.plot.draw_attention`.
Rows are the decoder's query positions labelled by the token predicted there (y_1 ... y_n,
`</s>`), so the "cross" row of a German word shows which English pieces the model looked at
while choosing it; the keys of "decoder-self" are the decoder inputs (`<s>`, y_1 ... y_n).
Indices of layers and heads are 0-based.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from transformer.decode.alignment import capture_weights
from transformer.decode.beam_search import beam_search
from transformer.decode.config import DecodeConfig
from transformer.model.attention import MultiHeadAttention
from transformer.model.masking import padding_mask

KINDS = ("self", "cross", "decoder-self")


@dataclass(frozen=True)
class AttentionMaps:
    """The attention weights of every layer and head for one sentence pair.

    Attributes:
        weights: float32 on the CPU; weights[l, h, i, j] is how much query i attends key j in
            head h of layer l. Every row sums to 1.
        kind: "self", "cross" or "decoder-self".
        query_labels: One subword per row (source pieces for "self"; for the other kinds the
            target token predicted at that position, ending with `</s>`).
        key_labels: One subword per column (source pieces for "self" and "cross"; `<s>` and
            the target pieces for "decoder-self").
        source: The source sentence.
        target: The target sentence (given or translated); None for "self" without a target.

    Shape:
        weights: (L, H, T, S) with T = len(query_labels) and S = len(key_labels).
    """

    weights: torch.Tensor
    kind: str
    query_labels: list[str]
    key_labels: list[str]
    source: str
    target: str | None

    def to_dict(self) -> dict:
        """Plain Python values (nested lists for the weights), ready for `json.dump`."""
        n_layers, n_heads = self.weights.shape[:2]
        return {
            "kind": self.kind,
            "source": self.source,
            "target": self.target,
            "layers": n_layers,
            "heads": n_heads,
            "query_labels": list(self.query_labels),
            "key_labels": list(self.key_labels),
            "weights": self.weights.tolist(),  # [layer][head][query][key]
        }


def attention_modules(model: torch.nn.Module, kind: str) -> list[MultiHeadAttention]:
    """The attention module of each layer for `kind`, first layer first.

    Raises:
        ValueError: for an unknown kind.
    """
    if kind == "self":
        return [layer.self_attn for layer in model.encoder.layers]
    if kind == "cross":
        return [layer.cross_attn for layer in model.decoder.layers]
    if kind == "decoder-self":
        return [layer.self_attn for layer in model.decoder.layers]
    raise ValueError(f"attention kind {kind!r} must be one of {', '.join(KINDS)}")


@torch.no_grad()
def collect_attention(
    model: torch.nn.Module,
    src: torch.Tensor,
    tgt_in: torch.Tensor | None = None,
    kind: str = "cross",
    src_key_padding_mask: torch.Tensor | None = None,
    tgt_key_padding_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Teacher-forced forward pass of a batch, returning the weights of every layer and head.

    Args:
        model: A `Transformer` (call `eval()` first, or attention dropout changes the weights).
        src: Source ids, padded with `pad_id`.
        tgt_in: Decoder input, `bos` + target ids, padded; not needed for "self".
        kind: "self", "cross" or "decoder-self".
        src_key_padding_mask: True at source padding; derived from `pad_id` when None.
        tgt_key_padding_mask: True at target padding; None lets padded query rows attend
            padded keys (causal masking still keeps them away from real rows).

    Returns:
        The weights, layers stacked after the batch dimension.

    Shape:
        src: (B, S). tgt_in: (B, T). output: (B, L, H, T, S) for "cross",
        (B, L, H, S, S) for "self", (B, L, H, T, T) for "decoder-self".

    Raises:
        ValueError: for an unknown kind, or a missing `tgt_in` when the kind needs one.
    """
    modules = attention_modules(model, kind)
    if kind != "self" and tgt_in is None:
        raise ValueError(f"attention kind {kind!r} needs the decoder input tgt_in")
    if src_key_padding_mask is None:
        src_key_padding_mask = padding_mask(src, model.config.pad_id)
    with capture_weights(modules) as captured:
        if kind == "self":
            model.encode(src, src_key_padding_mask)
        else:
            model(src, tgt_in, src_key_padding_mask, tgt_key_padding_mask)
    assert len(captured) == len(modules), "each attention module runs once per forward pass"
    return torch.stack(captured, dim=1)  # L x (B, H, T, S) -> (B, L, H, T, S)


def translate_ids(
    model: torch.nn.Module, src_ids: list[int], decode: DecodeConfig | None = None
) -> list[int]:
    """The model's own translation of one source sentence, as target ids (no bos/eos).

    Beam search with the settings of `decode`: the checkpoint's section (`config.decode` of
    `load_checkpoint`, or `Translator.decode`); None stands for `DecodeConfig()`, the paper's
    beam 4, length penalty 0.6 and maximum length source + 50. A beam of 1 is greedy search.
    """
    decode = decode or DecodeConfig()
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], dtype=torch.long, device=device)  # (1, S)
    best = beam_search(
        model,
        src,
        beam_size=decode.beam_size,
        length_penalty=decode.length_penalty,
        length_penalty_style=decode.length_penalty_style,
        max_len_a=decode.max_len_a,
        max_len_b=decode.max_len_b,
    )[0][0]
    return best.tokens


def attention_weights(
    model: torch.nn.Module,
    tokenizer,
    src: str,
    tgt: str | None = None,
    kind: str = "cross",
    decode: DecodeConfig | None = None,
) -> AttentionMaps:
    """The attention weights the model uses on one sentence pair, for notebooks and plots.

    Without `tgt`, the model first translates `src` (beam search as `transformer-translate`
    does, with the settings of `decode`) and its output tokens are then force-decoded: the
    exact output ids, not a re-tokenisation of the translated text. The model is put in eval
    mode for the call.

    Args:
        model: A `Transformer`.
        tokenizer: The model's `Tokenizer` (`encode`, `encode_target`, `decode`, pieces).
        src: Source sentence.
        tgt: Target sentence to force-decode; None translates `src` (not needed for "self").
        kind: "self", "cross" or "decoder-self".
        decode: Beam size, length penalty and maximum length for the translation: pass the
            checkpoint's section (`config.decode` from `load_checkpoint`, or
            `translator.decode`), as `transformer-attention` does, so that the translation is
            the one `Translator` and `transformer-translate` give; None stands for
            `DecodeConfig()` (the paper's settings, for a model without a checkpoint). A beam
            of 1 is greedy search.

    Returns:
        `AttentionMaps` with weights of shape (layers, heads, T, S) and the subword labels.

    Raises:
        ValueError: for an unknown kind or a source sentence with no tokens.

    Example:
        >>> model, tokenizer, config = load_checkpoint("checkpoint_avg5.pt")
        >>> maps = attention_weights(model, tokenizer, "A man is riding.", decode=config.decode)
        >>> maps.weights[-1].mean(0)  # last layer, averaged over heads: (T, S)
    """
    attention_modules(model, kind)  # validates the kind before any translation
    src_ids = tokenizer.encode(src)
    if not src_ids:
        raise ValueError(f"source sentence {src!r} has no tokens")
    was_training = model.training
    model.eval()
    try:
        tgt_ids = None
        if tgt is not None:
            tgt_ids = tokenizer.encode_target(tgt)
        elif kind != "self":
            tgt_ids = translate_ids(model, src_ids, decode)
            tgt = tokenizer.decode(tgt_ids)
        device = next(model.parameters()).device
        src_tensor = torch.tensor([src_ids], dtype=torch.long, device=device)  # (1, S)
        tgt_in = None
        if tgt_ids is not None:
            bos = model.config.bos_id
            tgt_in = torch.tensor([[bos, *tgt_ids]], dtype=torch.long, device=device)  # (1, T)
        weights = collect_attention(model, src_tensor, tgt_in, kind)[0]  # (L, H, T, S)
    finally:
        model.train(was_training)
    source_pieces = tokenizer.source_pieces(src_ids)
    if kind == "self":
        queries, keys = source_pieces, source_pieces
    else:
        predicted = tokenizer.target_pieces([*tgt_ids, model.config.eos_id])
        inputs = tokenizer.target_pieces([model.config.bos_id, *tgt_ids])
        queries, keys = predicted, source_pieces if kind == "cross" else inputs
    return AttentionMaps(weights.float().cpu(), kind, queries, keys, src, tgt)
