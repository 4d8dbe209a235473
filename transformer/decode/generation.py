"""One batch of `Translator.generate`: search (greedy, beam or sampling), prefixes, alignments.

`Translator` checks the call's options (`transformer.decode.inputs`) and batches the
sentences (`transformer.decode.batched`); the functions here turn one batch of source ids into
`Translation`s: `search_batch` runs the search the request names, `prefix_ids` encodes and
checks the target prefixes, `align_batch` aligns every hypothesis to its source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transformer.decode.alignment import cross_attention, word_alignment
from transformer.decode.beam_search import beam_search
from transformer.decode.greedy import greedy_search
from transformer.decode.inputs import Request
from transformer.decode.sampling import sample_search
from transformer.decode.search import Hypothesis


@dataclass(frozen=True)
class Translation:
    """One output of `Translator.generate`.

    Attributes:
        text: The detokenized translation.
        score: log_prob / lp(|Y|) (`transformer.decode.search.Hypothesis.score`).
        log_prob: log P(Y | X).
        tokens: The output ids (no bos, no eos).
        finished: True when the output ended with eos, False when it was cut at the maximum
            length (its log P then has no eos term).
        alignment: (source word, target word) pairs (`transformer.decode.alignment`) when
            asked for, else None.
    """

    text: str
    score: float
    log_prob: float
    tokens: list[int]
    finished: bool = True
    alignment: list[tuple[int, int]] | None = None


def search_batch(
    models: Sequence[torch.nn.Module],
    src: torch.Tensor,
    request: Request,
    nbest: int,
    prefix: list[list[int]] | None = None,
    seeds: list[int] | None = None,
) -> list[list[Hypothesis]]:
    """Greedy search, sampling or beam search of one batch, as `request` says.

    Args:
        models: One model, or an ensemble's members.
        src: Source ids, right-padded.
        request: The checked settings of the call.
        nbest: Hypotheses per sentence (1 for greedy).
        prefix: Target ids to force per sentence, or None.
        seeds: One sampling seed per sentence (only for sampling).

    Returns:
        For each sentence, its best `nbest` hypotheses by score, best first.

    Shape:
        src: (B, S).
    """
    d = request.decode
    settings = dict(
        max_len_a=d.max_len_a,
        max_len_b=d.max_len_b,
        length_penalty=d.length_penalty,
        length_penalty_style=d.length_penalty_style,
        prefix=prefix,
    )
    model = list(models) if len(models) > 1 else models[0]
    if request.greedy:
        return [[h] for h in greedy_search(model, src, **settings)]
    if d.sampling:
        drawn = sample_search(
            model,
            src,
            seeds,
            num_samples=d.num_samples,
            temperature=d.temperature,
            top_k=d.top_k,
            top_p=d.top_p,
            **settings,
        )
        return [sorted(s, key=lambda h: h.score, reverse=True)[:nbest] for s in drawn]
    return beam_search(model, src, beam_size=d.beam_size, nbest=nbest, **settings)


def align_batch(
    models: Sequence[torch.nn.Module],
    tokenizer,
    src: torch.Tensor,
    found: list[list[Hypothesis]],
    src_ids: list[list[int]],
    layer: int | None,
) -> list[list[list[tuple[int, int]] | None]]:
    """The word alignment of every hypothesis of a batch (None each when `layer` is None).

    Args:
        models: One model, or an ensemble's members.
        tokenizer: For the pieces of both sides.
        src: Source ids of the batch, right-padded.
        found: The hypotheses of each sentence.
        src_ids: The source ids of each sentence (unpadded).
        layer: The decoder layer that aligns, or None for no alignment.

    Returns:
        For each sentence, one list of (source word, target word) pairs per hypothesis.

    Shape:
        src: (B, S); each hypothesis row teacher-forces a copy of its sentence's row.
    """
    if layer is None:
        return [[None] * len(hypotheses) for hypotheses in found]
    owners = [b for b, hypotheses in enumerate(found) for _ in hypotheses]
    targets = [h.tokens for hypotheses in found for h in hypotheses]
    index = torch.tensor(owners, dtype=torch.long, device=src.device)
    weights = iter(cross_attention(models, src[index], targets, layer))  # (B, S) -> (n, S)
    source_pieces = [tokenizer.source_pieces(ids) for ids in src_ids]
    return [
        [
            word_alignment(next(weights), source_pieces[b], tokenizer.target_pieces(h.tokens))
            for h in hypotheses
        ]
        for b, hypotheses in enumerate(found)
    ]


def prefix_ids(
    tokenizer, prefix: list[str] | None, indices: list[int], max_positions: int
) -> list[list[int]] | None:
    """The target ids of the prefixes of the sentences `indices`; None without prefixes.

    Args:
        tokenizer: Encodes the target side.
        prefix: One prefix per sentence of the call ("" for none), or None.
        indices: The sentences to decode (those with source tokens).
        max_positions: The model's (the smallest of an ensemble).

    Raises:
        ValueError: for a prefix of `max_positions` tokens or more, naming it.
    """
    if prefix is None or not any(prefix[i] for i in indices):
        return None
    encoded = tokenizer.encode_target_batch([prefix[i] for i in indices])
    for i, ids in zip(indices, encoded, strict=True):
        if len(ids) >= max_positions:
            raise ValueError(
                f"prefix[{i}] has {len(ids)} tokens; the model decodes at most {max_positions} "
                "(max_positions), eos included"
            )
    return encoded
