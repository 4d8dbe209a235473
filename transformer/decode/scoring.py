"""Scoring given translations: log P(Y | X) of a target sentence by one teacher-forced pass.

The decoder reads bos y_1 ... y_n and is scored on y_1 ... y_n eos, so |Y| = n + 1 terms,
as for a finished search hypothesis (conventions in `transformer.decode.search`): the score of
a beam hypothesis is exactly its n-best score (up to float rounding, 1e-5). An ensemble scores
with its members' mean probability of each target token (`transformer.decode.ensemble`),
the distribution its searches use.

Uses: rescoring n-best lists, filtering back-translated or crawled pairs by the model's
probability, comparing two systems' outputs under one model, forced decoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transformer.decode.batched import batches
from transformer.decode.ensemble import as_models, mean_probability
from transformer.decode.inputs import Request
from transformer.decode.search import length_penalty_function


@dataclass(frozen=True)
class Score:
    """log P(Y | X) of one sentence pair, and the quantities derived from it.

    Attributes:
        log_prob: log P(Y | X), summed over the target tokens and the final eos.
        length: |Y| = target tokens + 1 (the eos), the number of terms in `log_prob`.
        score: log_prob / lp(|Y|), the length-penalised score that beam search maximises
            (`transformer.decode.search.length_penalty`).
    """

    log_prob: float
    length: int
    score: float

    @property
    def per_token(self) -> float:
        """log_prob / |Y|: the mean log-probability per target token (eos included)."""
        return self.log_prob / self.length


def padded(rows: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> torch.Tensor:
    """Right-pad lists of ids into one tensor.

    Shape:
        output: (B, L), L the longest row (at least 1).
    """
    longest = max((len(row) for row in rows), default=0)
    out = torch.full((len(rows), max(longest, 1)), pad_id, dtype=torch.long)
    for index, row in enumerate(rows):
        out[index, : len(row)] = torch.tensor(list(row), dtype=torch.long)
    return out.to(device)


@torch.no_grad()
def score_batch(
    model: torch.nn.Module | Sequence[torch.nn.Module],
    src: torch.Tensor,
    targets: Sequence[Sequence[int]],
    src_key_padding_mask: torch.Tensor | None = None,
) -> list[float]:
    """log P(y_1 ... y_n eos | X) of each target, for a batch of pairs.

    Args:
        model: A `Transformer` in eval mode, or a list of them (an ensemble).
        src: Source ids, right-padded with `pad_id` (each row with at least one token).
        targets: One list of target ids per row (no bos, no eos; may be empty).
        src_key_padding_mask: True at padding; derived from `pad_id` when None.

    Returns:
        One log-probability per pair, in row order.

    Shape:
        src: (B, S). targets: B lists. Inside: tgt_in, tgt_out (B, T) with T = longest + 1.
    """
    models = as_models(model)
    config = models[0].config
    device = src.device
    tgt_in = padded([[config.bos_id, *ids] for ids in targets], config.pad_id, device)  # (B, T)
    tgt_out = padded([[*ids, config.eos_id] for ids in targets], config.pad_id, device)  # (B, T)
    real = tgt_out.ne(config.pad_id)  # (B, T), True at scored positions
    members = []
    for member in models:
        logits = member(src, tgt_in, src_key_padding_mask).float()  # (B, T) -> (B, T, V)
        chosen = logits.gather(2, tgt_out.unsqueeze(2)).squeeze(2)  # (B, T, V) -> (B, T)
        members.append(chosen - torch.logsumexp(logits, dim=-1))  # log_softmax at the targets
    token_log_probs = mean_probability(members).masked_fill(~real, 0.0)  # (B, T)
    return token_log_probs.sum(dim=1).tolist()  # (B, T) -> (B,)


def score_ids(
    models: Sequence[torch.nn.Module],
    src_ids: Sequence[Sequence[int]],
    tgt_ids: Sequence[Sequence[int]],
    request: Request,
    onednn: bool = False,
    device: torch.device | str = "cpu",
) -> list[Score]:
    """Score encoded pairs in length-sorted batches (`transformer.decode.batched`).

    Args:
        models: One model, or an ensemble's members.
        src_ids: Source ids of each pair (each with at least one token).
        tgt_ids: Target ids of each pair (no bos, no eos).
        request: The call's settings: the length penalty, `max_tokens` (tokens of the longer
            side, eos included, per batch, padding included) and `progress`.
        onednn: Run float32 CPU products on oneDNN (`transformer.cpu.onednn`).
        device: Where the models are.

    Returns:
        One `Score` per pair, in input order.
    """
    decode = request.decode
    lp = length_penalty_function(decode.length_penalty, decode.length_penalty_style)
    lengths = [max(len(s), len(t) + 1) for s, t in zip(src_ids, tgt_ids, strict=True)]
    pad_id = models[0].config.pad_id
    scores: list[Score | None] = [None] * len(src_ids)
    for group in batches(lengths, decode.max_tokens, models, onednn, 1, request.progress):
        src = padded([src_ids[k] for k in group], pad_id, device)
        found = score_batch(models, src, [tgt_ids[k] for k in group])
        for k, log_prob in zip(group, found, strict=True):
            length = len(tgt_ids[k]) + 1
            scores[k] = Score(log_prob, length, log_prob / lp(length))
    return scores
