"""Top-p draws (Holtzman et al., 2020): one token per row from its nucleus.

`nucleus_draw` proposes a token from the row's whole distribution and keeps it when it is in
the nucleus (rejection sampling, with the model's own distribution as the proposal): a kept
token is drawn with probability proportional to its probability within the nucleus, and the
proposal is kept with probability P(nucleus) >= p. A row whose proposal falls outside the
nucleus proposes again with another, independent uniform number, up to `RETRIES` times, and
then draws from the exact nucleus (`exact_nucleus_draw`, over `transformer.decode.nucleus`)
with one more. Each way gives the token q its nucleus probability P(q) / P(nucleus), so all
do together: P(q) + (1 - P(nucleus)) * P(q) / P(nucleus) for a proposal and an exact draw.
The proposal and its test cost a few arithmetic passes over the vocabulary, where an exact
nucleus of a flat row (most of the vocabulary kept) costs about ten; the exact draw is left to
the rows rejected every time, a fraction (1 - p) ** (RETRIES + 1) of them at most on average.

The nucleus is the sorted one of `transformer.decode.nucleus` (ties by token id, the lower
first): a token is in it when the tokens before it in that order hold less than p of the
mass (`in_nucleus`).
"""

from __future__ import annotations

import torch

from transformer.decode.inversion import draw
from transformer.decode.nucleus import FLOOR, many_weights, select_nucleus

RETRIES = 2  # proposals after the first before a rejected row draws from the exact nucleus


def in_nucleus(weights: torch.Tensor, tokens: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
    """Whether each row's token is in its nucleus: the tokens before it in the sorted order
    (heavier, or as heavy and of a lower id) hold less than `limit`.

    The heavier tokens' mass is sum(max(w - c, 0)) + c * (their count), for the chosen
    token's weight c, their count from the signs of w - c: arithmetic passes over the row,
    several times faster on a CPU than a comparison mask and a masked sum. Tokens as heavy
    as the chosen one are counted by id only in the rare rows that have any and are not
    settled without them.

    Args:
        weights: Each row's distribution, up to a factor. tokens: One token id per row.
        limit: p times each row's total weight.

    Shape:
        weights: (R, V). tokens, limit: (R,). output: (R,) bool.
    """
    chosen = weights.gather(1, tokens.unsqueeze(1))  # (R, 1)
    excess = weights - chosen  # (R, V)
    above = excess.clamp(min=0).sum(dim=1)  # (R,) the heavier ones' excess over c
    signs = excess.sign_()  # (R, V) 1 heavier, 0 as heavy, -1 lighter
    balance, unequal = signs.sum(dim=1), signs.abs_().sum(dim=1)  # (R,) each
    heavier = (balance + unequal) / 2  # (R,) their count
    before = above + chosen.squeeze(1) * heavier  # (R,) their mass
    kept = before < limit
    tied = kept & (unequal < weights.shape[1] - 1)  # (R,) others as heavy may come first
    if bool(tied.any()):
        rows = tied.nonzero().squeeze(1)  # (t,)
        ids = torch.arange(weights.shape[1], device=weights.device)  # (V,)
        ties = (weights[rows] == chosen[rows]) & (ids < tokens[rows].unsqueeze(1))  # (t, V)
        kept[rows] = before[rows] + chosen[rows].squeeze(1) * ties.sum(dim=1) < limit[rows]
    return kept


def exact_nucleus_draw(
    log_probs: torch.Tensor, top_p: float, uniforms: torch.Tensor
) -> torch.Tensor:
    """One token per row from its nucleus (`transformer.decode.nucleus`), by inversion.

    A row whose candidates hold its whole nucleus (`Nucleus.listed`) draws among them in their
    sorted order (most probable first), any other over the vocabulary in id order (`draw`):
    both are the inverse-CDF draw of the same distribution, `nucleus_weights`.

    Args:
        log_probs, top_p: As in `transformer.decode.nucleus.nucleus_weights`.
        uniforms: One number in [0, 1) per row.

    Returns:
        Token ids, always of the nucleus.

    Shape:
        log_probs: (R, V). uniforms: (R,). output: (R,) long.
    """
    found = select_nucleus(log_probs, top_p)
    R, listed = log_probs.shape[0], found.listed
    tokens = torch.empty(R, dtype=torch.long, device=log_probs.device)
    if found.many.numel():  # over the vocabulary, in id order
        tokens[found.many] = draw(many_weights(found), uniforms[found.many])  # (m, V) -> (m,)
    if not bool(listed.any()):
        return tokens
    chosen = found.keep & listed[found.rows]  # (n,) the nucleus tokens of the listed rows
    rows, ids = found.rows[chosen], found.ids[chosen]  # (c,) each, by row, most probable first
    member = found.member[chosen].double()  # (c,)
    cumulative = member.cumsum(0)  # (c,) from the first of any row
    first = torch.searchsorted(rows, rows)  # (c,) where each one's row starts
    within = cumulative - (cumulative[first] - member[first])  # (c,) row mass up to each
    size = torch.bincount(rows, minlength=R)  # (R,) nucleus tokens per row (0: not listed)
    last = size.cumsum(0) - 1  # (R,) position of each row's last one
    target = uniforms.double()[rows] * within[last[rows]]  # (c,) u * the row's nucleus mass
    passed = torch.bincount(rows[within <= target], minlength=R)  # (R,) those below u
    pick = torch.minimum(last - size + 1 + passed, last)  # (R,) the first above u
    tokens[listed] = ids[pick[listed]]
    return tokens


def nucleus_draw(
    log_probs: torch.Tensor, top_p: float, uniforms: torch.Tensor, retries: torch.Tensor
) -> torch.Tensor:
    """One token per row from its nucleus: a proposal from the whole distribution, kept when
    in the nucleus, else another, up to k proposals, then an exact draw (module docstring).

    Args:
        log_probs, top_p: As in `transformer.decode.nucleus.nucleus_weights`.
        uniforms: One number in [0, 1) per row, for the first proposal.
        retries: k more per row, independent of `uniforms` and of each other: the next k - 1
            proposals of a row whose proposals were rejected, then its exact draw.

    Returns:
        Token ids, always of the nucleus.

    Shape:
        log_probs: (R, V). uniforms: (R,). retries: (R, k), k >= 1. output: (R,) long.
    """
    log_probs = log_probs.float()
    best = log_probs.amax(dim=1, keepdim=True)  # (R, 1)
    # the most probable weighs 1; floored as in the nucleus (a floored token is never in it,
    # and its weight only enters the proposal, which the test corrects)
    weights = (log_probs - best).clamp_(min=FLOOR).exp_()  # (R, V)
    limit = top_p * weights.sum(dim=1)  # (R,)
    tokens = draw(weights, uniforms)  # (R,)
    kept = in_nucleus(weights, tokens, limit)  # (R,)
    rows = torch.arange(log_probs.shape[0], device=log_probs.device)  # (R,) rows still drawing
    for column in range(retries.shape[1]):
        if bool(kept.all()):
            return tokens
        rejected = (~kept).nonzero().squeeze(1)  # (r,) of the rows still drawing
        rows, weights, limit = rows[rejected], weights[rejected], limit[rejected]  # (r, ...)
        if column == retries.shape[1] - 1:  # the last number: the exact nucleus
            tokens[rows] = exact_nucleus_draw(log_probs[rows], top_p, retries[rows, column])
            return tokens
        drawn = draw(weights, retries[rows, column])  # (r,)
        kept = in_nucleus(weights, drawn, limit)
        tokens[rows] = drawn
    return tokens
