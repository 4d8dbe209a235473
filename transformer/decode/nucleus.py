"""The nucleus of top-p sampling (Holtzman et al., 2020), found without sorting the vocabulary.

The nucleus of a row is the smallest set of most probable tokens whose probability reaches p:
the row sorted by probability (ties by token id, the lower first), a token is kept when the
tokens before it hold less than p of the mass. Sorting the whole vocabulary at every step costs
more than the decoder step itself on a CPU, and a flat distribution (a random or an unsure
model's) has most of the vocabulary in its nucleus, so each row is settled by the first of
these that can:

1. A row whose largest log-probability is at least log(p / `TOP`) (a peaked row, as a
   trained model's usually is) may have its nucleus among its `TOP` most probable tokens
   (`torch.topk`); it is settled there if their mass reaches p and no token outside them
   ties with the last one kept. (For log-probabilities up to a constant this choice of rows
   is only a guess, which costs time but never changes the nucleus.)
2. Any other row is bucketed: every token falls into one of `BUCKETS` equal intervals of
   log-probability between the row's maximum and probability (1 - p) / (2V), or below it,
   into one more bucket (a token that light is never in the nucleus: all the tokens at most
   as probable hold less than 1 - p), and the mass of each bucket is summed. Buckets follow
   the probability order, so the tokens of the buckets before the one where the cumulative
   mass (most probable first) reaches p are all kept, those after it all dropped; only the
   tokens of that boundary bucket (a few dozen on a flat row) are sorted, and kept while the
   mass before them stays below p. When the buckets up to the boundary hold at most `FEW`
   tokens, they are all sorted instead.

The sorted tokens are the row's candidates. A row whose whole nucleus is among them (steps 1
and 2's `FEW` rows: `Nucleus.listed`) is drawn among them, most probable first, any other
over the vocabulary in id order (`transformer.decode.nucleus_draw.exact_nucleus_draw`);
which way a row takes depends on that row alone. The nucleus is that of the sorted
definition (tested against a brute-force sort), up to the float32 rounding of masses that
equal p to about 1e-7.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

TOP = 16  # step 1: the most probable tokens tried first
BUCKETS = 1024  # step 2: log-probability intervals (and one more: the light tail)
TAIL = 16  # the tail is summed in this many parts (one would chain the additions of a row)
FEW = 128  # at most this many tokens up to the boundary: the row is drawn among them alone
# Log-weights (relative to the most probable) are raised to FLOOR before exp: exp is many
# times slower on a CPU near and past float32's smallest numbers (e^-87), and a token below
# 2e-28 of the most probable is never in a nucleus, nor moves a total >= 1 by one ulp.
FLOOR = -64.0


class Nucleus(NamedTuple):
    """What `select_nucleus` finds for R rows: their n candidates, and the rest of the
    nucleus of the m rows that are not `listed`."""

    listed: torch.Tensor  # (R,) bool: the row's whole nucleus is among its candidates
    rows: torch.Tensor  # (n,) the candidates, by row, then weight (descending), then id
    ids: torch.Tensor  # (n,)
    member: torch.Tensor  # (n,) float32 weights (probabilities up to a factor per row)
    keep: torch.Tensor  # (n,) bool: in the nucleus
    many: torch.Tensor  # (m,) the rows not listed
    kept: torch.Tensor | None  # (m, V) their nucleus weights but for candidates; None: m = 0


def _sorted_candidates(rows, ids, member, ahead, limit):
    """Candidates by row, weight (descending) and id, and whether each is in the nucleus.

    Args:
        rows, ids, member: The candidates in any order but by row, then id.
        ahead: The mass of each row's tokens before its candidates. limit: p * its total.

    Shape:
        rows, ids, member: (n,). ahead, limit: (R,). outputs: (n,) each.
    """
    order = member.argsort(descending=True, stable=True)  # ties keep the lower id first
    order = order[rows[order].argsort(stable=True)]  # by row, then weight, then id
    rows, ids, member = rows[order], ids[order], member[order]
    cumulative = member.double().cumsum(0)  # (n,) from the first candidate of any row
    first = torch.searchsorted(rows, rows)  # (n,) where each candidate's row starts
    before = ahead[rows] + (cumulative - member - (cumulative[first] - member[first]))  # (n,)
    return [rows, ids, member, before < limit[rows]]


def _top(log_probs, best, top_p):
    """Step 1 for the rows of `log_probs`: which it settles, and their candidates (as
    `_sorted_candidates` gives them, for the s rows settled).

    Shape:
        log_probs: (r, V). best: (r, 1), the largest of each row. outputs: (r,) bool,
        (s*K,) each.
    """
    r, V = log_probs.shape
    K = min(TOP, V)
    floored = torch.maximum(log_probs, best + FLOOR)  # (r, V) no denormal in the sum below
    limit = top_p * (torch.logsumexp(floored, dim=1, keepdim=True) - best).exp()  # (r, 1)
    ids = log_probs.topk(K, dim=1).indices.sort(dim=1).values  # (r, V) -> (r, K), by id
    member = (log_probs.gather(1, ids) - best).exp()  # (r, K), the most probable is 1
    member, order = member.sort(dim=1, descending=True, stable=True)  # ties by id
    ids = ids.gather(1, order)  # (r, K)
    keep = member.double().cumsum(dim=1) - member < limit  # (r, K) mass before each < p
    last = member.gather(1, keep.sum(dim=1, keepdim=True) - 1).squeeze(1)  # (r,) last kept
    # settled when the last kept outweighs the K-th: the K-th is out, and so is any token
    # outside the top K that could tie with a kept one and have a lower id
    settled = (last > member[:, -1]) | (K == V)  # (r,)
    rows = torch.arange(r, device=ids.device).unsqueeze(1).expand(r, K)  # (r, K)
    return settled, [part[settled].reshape(-1) for part in (rows, ids, member, keep)]


def _buckets(log_probs, best, top_p):
    """Step 2 for the rows of `log_probs`.

    Returns:
        (candidates, few, kept): the candidates as `_sorted_candidates` gives them; the rows
        whose candidates hold all their nucleus (None: no row); the others' nucleus weights
        but for the candidates (None: no row).

    Shape:
        log_probs: (r, V). best: (r, 1). outputs: (n,) each, (r,) bool, (m, V).
    """
    r, V = log_probs.shape
    shifted = (log_probs - best).clamp_(min=FLOOR)  # (r, V), at most 0
    weights = shifted.exp()  # (r, V), the most probable is 1
    total = weights.sum(dim=1)  # (r,)
    limit = top_p * total  # (r,)
    # the log-weight of probability (1 - p) / (2V): log((1 - p) / (2V)) + log(total), below 0
    light = math.log((1 - top_p) / (2 * V)) + total.log().unsqueeze(1)  # (r,) -> (r, 1)
    # bucket floor(B * x / light): 0 for the most probable, B for the tail (x <= light, -inf),
    # whose mass is summed in TAIL parts, by token id (most of a peaked row is in the tail)
    tail = (torch.arange(V, device=shifted.device) % TAIL + BUCKETS).float()  # (V,)
    buckets = torch.minimum(shifted.mul_(BUCKETS / light), tail, out=shifted).long()  # (r, V)
    parts = weights.new_zeros((r, BUCKETS + TAIL)).scatter_add_(1, buckets, weights)  # (r, B+T)
    mass = torch.cat([parts[:, :BUCKETS], parts[:, BUCKETS:].sum(dim=1, keepdim=True)], dim=1)
    reached = mass.cumsum(dim=1)  # (r, B+1) mass of buckets 0..b, the most probable first
    # the boundary: the first bucket whose cumulative mass reaches p; the mass of those
    # before it is below p, so its best token is kept (the tail: p within rounding of 1)
    boundary = (reached < limit.unsqueeze(1)).sum(dim=1, keepdim=True).clamp_(max=BUCKETS)
    if bool(boundary.eq(BUCKETS).any()):
        buckets.clamp_(max=BUCKETS)  # the tail as one bucket
    ahead = torch.cat([mass.new_zeros((r, 1)), reached[:, :-1]], dim=1).gather(1, boundary)
    # every token of buckets 0..b < B weighs at least exp(light * (b + 1) / B)
    lightest = (light * (boundary + 1) / BUCKETS).exp()  # (r, 1)
    few = (reached.gather(1, boundary) <= FEW * lightest) & (boundary < BUCKETS)  # (r, 1)
    all_few, any_few = bool(few.all()), bool(few.any())
    if all_few:
        candidate = buckets <= boundary  # (r, V)
    elif any_few:
        candidate = torch.where(few, buckets <= boundary, buckets == boundary)  # (r, V)
    else:
        candidate = buckets == boundary  # (r, V)
    rows, ids = candidate.nonzero().unbind(1)  # (n,) each, by row, then id
    few = few.squeeze(1)  # (r, 1) -> (r,)
    if any_few:
        ahead = ahead.squeeze(1).masked_fill(few, 0.0)  # a few row sorts them all
    found = _sorted_candidates(rows, ids, weights[rows, ids], ahead.view(-1), limit)
    if all_few:
        return found, few, None
    kept = weights.mul_(buckets < boundary)  # (r, V) before the boundary; candidates are copies
    if any_few:
        kept = kept[~few]  # (r, V) -> (m, V): a few row lists all it keeps
    return found, few if any_few else None, kept


def select_nucleus(log_probs: torch.Tensor, top_p: float) -> Nucleus:
    """Steps 1 and 2 of the module docstring, for every row.

    Args:
        log_probs, top_p: As in `nucleus_weights`.

    Shape:
        log_probs: (R, V). outputs: see `Nucleus`.
    """
    R = log_probs.shape[0]
    log_probs = log_probs.float()
    best = log_probs.amax(dim=1, keepdim=True)  # (R, 1)
    listed = torch.zeros(R, dtype=torch.bool, device=log_probs.device)
    parts, rest = [], torch.arange(R, device=log_probs.device)
    likely = best.squeeze(1) >= math.log(top_p / TOP)  # (R,) probable enough to try step 1
    if bool(likely.any()):
        rows = rest if bool(likely.all()) else likely.nonzero().squeeze(1)  # (r,)
        some = (log_probs, best) if rows.numel() == R else (log_probs[rows], best[rows])
        settled, found = _top(*some, top_p)
        parts.append([rows[found[0]], *found[1:]])
        listed[rows[settled]] = True
        rest = (~listed).nonzero().squeeze(1)  # (r,) the rows left to step 2
    many, kept = rest[:0], None
    if rest.numel():
        some = (log_probs, best) if rest.numel() == R else (log_probs[rest], best[rest])
        found, few, kept = _buckets(*some, top_p)
        parts.append([rest[found[0]], *found[1:]])
        if kept is None:  # every row is few
            listed[rest] = True
        elif few is None:  # none is
            many = rest
        else:
            listed[rest[few]] = True
            many = rest[~few]
    if len(parts) == 2:  # the two steps' candidates, by row
        rows, ids, member, keep = (torch.cat(part) for part in zip(*parts, strict=True))
        order = rows.argsort(stable=True)
        parts = [[rows[order], ids[order], member[order], keep[order]]]
    return Nucleus(listed, *parts[0], many, kept)


def many_weights(found: Nucleus) -> torch.Tensor:
    """The nucleus weights of the rows not listed (`found.many`), over the whole vocabulary
    (written over `found.kept`, which is returned).

    Shape:
        output: (m, V).
    """
    kept = found.kept
    chosen = found.keep & ~found.listed[found.rows]  # (n,) kept candidates of those rows
    rows = found.rows[chosen]
    if found.many.numel() < found.listed.numel():  # numbered as the rows of kept
        rows = torch.searchsorted(found.many, rows)
    kept[rows, found.ids[chosen]] = found.member[chosen]
    return kept


def spread(found: Nucleus, shape: torch.Size) -> torch.Tensor:
    """The nucleus weights of every row over its whole vocabulary, 0 outside the nucleus
    (`found.kept` may be written over).

    Shape:
        shape: (R, V), the log-probabilities'. output: (R, V).
    """
    if found.many.numel() == shape[0]:
        return many_weights(found)  # every row: no copy
    weights = found.member.new_zeros(shape)  # (R, V)
    if found.many.numel():
        weights[found.many] = many_weights(found)  # (m, V) into (R, V)
    chosen = found.keep & found.listed[found.rows]  # (n,) kept candidates of listed rows
    weights[found.rows[chosen], found.ids[chosen]] = found.member[chosen]
    return weights


def nucleus_weights(log_probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Each row's distribution restricted to its nucleus, up to a factor (module docstring).

    Args:
        log_probs: Log-probabilities up to a constant per row (-inf for banned tokens), at
            least one finite per row.
        top_p: The mass p of the nucleus, in [1e-6, 1 - 1e-6] (checked by `DecodeConfig`: float32
            sums cannot tell p * total from 0, or from the total, any nearer).

    Returns:
        float32 weights proportional to the probabilities inside the nucleus, 0 outside.

    Shape:
        log_probs: (R, V). output: (R, V).
    """
    return spread(select_nucleus(log_probs, top_p), log_probs.shape)
