"""Word alignments from cross-attention, in the Pharaoh format `0-0 1-2 ...`.

For each target piece y_i, the source piece it is aligned to is the one that the query
predicting y_i attends most, in the encoder-decoder attention of one decoder layer, averaged
over its heads (and over the members of an ensemble). The decoder reads bos y_1 ... y_n in one
teacher-forced pass, so the row of y_i is the position whose output is y_i, as in the maps of
`transformer.evaluate.attention_maps`. Pieces are then mapped to words: a SentencePiece piece
starting with the word-boundary mark U+2581 starts a new word, so word indices are those of the
whitespace-separated words of the (detokenized) text. Each target word gets every source word
that one of its pieces points to; pairs `source-target` (0-based) are sorted and unique.

The last layer is the default (as fairseq's `--print-alignment`); Garg et al. (2019) found the
penultimate layer of a 6-layer model best, so the layer is a setting.

Source: Pharaoh format of Koehn (2004); attention-based alignment as in fairseq
(`--print-alignment`) and Garg et al. (2019), "Jointly Learning to Align and Translate with
Transformer Models".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from transformer.decode.ensemble import as_models
from transformer.decode.scoring import padded

WORD_START = "\u2581"  # SentencePiece's "▁", the whitespace before a word


@contextmanager
def capture_weights(modules: Sequence[torch.nn.Module]) -> Iterator[list[torch.Tensor]]:
    """Within the block, each call of `modules[i]` returns and records its attention weights.

    A forward pre-hook switches on `need_weights` (the layers always pass it as a keyword;
    the module then runs the written-out kernel, equal to the fused one within 1e-5 in
    float32) and a forward hook keeps the returned weights. Yields a list that fills with one
    (B, H, T, S) tensor per call, in call order. The hooks are removed on exit.
    """
    captured: list[torch.Tensor] = []

    def ask_for_weights(module, args, kwargs):
        return args, {**kwargs, "need_weights": True}

    def keep_weights(module, args, output):
        captured.append(output[1].detach())

    handles = []
    try:
        for module in modules:
            handles.append(module.register_forward_pre_hook(ask_for_weights, with_kwargs=True))
            handles.append(module.register_forward_hook(keep_weights))
        yield captured
    finally:
        for handle in handles:
            handle.remove()


def check_layer(model: torch.nn.Module, layer: object) -> None:
    """Refuse an alignment layer that the decoder does not have (negative counts from the end).

    Raises:
        ValueError: `alignment_layer (6) is out of range: the decoder has 6 layers`.
    """
    n_layers = model.config.n_decoder_layers
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise ValueError(f"alignment_layer ({layer!r}) must be an integer")
    if not -n_layers <= layer < n_layers:
        raise ValueError(
            f"alignment_layer ({layer}) is out of range: the decoder has {n_layers} layers "
            "(0-based; -1 is the last)"
        )


@torch.no_grad()
def cross_attention(
    model: torch.nn.Module | Sequence[torch.nn.Module],
    src: torch.Tensor,
    targets: Sequence[Sequence[int]],
    layer: int = -1,
) -> list[torch.Tensor]:
    """Head-averaged cross-attention of one decoder layer for given target ids.

    Args:
        model: A `Transformer` in eval mode, or a list of them (their weights are averaged).
        src: Source ids, right-padded.
        targets: Target ids of each row (no bos, no eos).
        layer: The decoder layer (0-based; negative counts from the last).

    Returns:
        For row b, weights[i, j] = how much the query predicting target token i attends
        source token j, on the CPU in float32.

    Shape:
        src: (B, S). output: B tensors (len(targets[b]), S_b), S_b the row's source tokens.
    """
    models = as_models(model)
    config = models[0].config
    tgt_in = padded([[config.bos_id, *ids] for ids in targets], config.pad_id, src.device)
    total = None
    for member in models:
        with capture_weights([member.decoder.layers[layer].cross_attn]) as captured:
            member(src, tgt_in)  # (B, S), (B, T) -> (B, T, V), weights captured
        averaged = captured[0].float().mean(dim=1)  # (B, H, T, S) -> (B, T, S)
        total = averaged if total is None else total + averaged
    weights = (total / len(models)).cpu()  # (B, T, S)
    lengths = src.ne(config.pad_id).sum(dim=1).tolist()  # (B, S) -> (B,)
    return [weights[b, : len(ids), : lengths[b]] for b, ids in enumerate(targets)]


def word_indices(pieces: Sequence[str]) -> list[int]:
    """The 0-based word of each piece: a piece starting with U+2581 starts a new word."""
    words, current = [], -1
    for piece in pieces:
        if current < 0 or piece.startswith(WORD_START):
            current += 1
        words.append(current)
    return words


def word_alignment(
    weights: torch.Tensor, source_pieces: Sequence[str], target_pieces: Sequence[str]
) -> list[tuple[int, int]]:
    """Hard word alignment: each target piece to the source piece it attends most, as words.

    Args:
        weights: Cross-attention of each target piece (row) over the source pieces (columns).
        source_pieces, target_pieces: The pieces of the two sides (`Tokenizer.*_pieces`).

    Returns:
        Sorted, unique (source word, target word) pairs.

    Shape:
        weights: (T, S) with T = len(target_pieces), S = len(source_pieces).
    """
    if not target_pieces:
        return []
    source_words, target_words = word_indices(source_pieces), word_indices(target_pieces)
    best = weights.argmax(dim=1).tolist()  # (T, S) -> (T,)
    return sorted({(source_words[j], target_words[i]) for i, j in enumerate(best)})


def pharaoh(pairs: Sequence[tuple[int, int]]) -> str:
    """Alignment pairs in the Pharaoh format: `0-0 1-2 2-1` (source-target, 0-based)."""
    return " ".join(f"{i}-{j}" for i, j in pairs)
