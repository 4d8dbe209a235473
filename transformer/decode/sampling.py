"""Sampling: each output token drawn at random, for back-translation and data augmentation.

At every step a row's next token is drawn from the model's distribution, reshaped by three
settings (checked by `DecodeConfig`), applied in this order:

1. temperature T: probabilities proportional to exp(log p / T) (T < 1 sharpens; as T -> 0
   the draw becomes the argmax, i.e. greedy search);
2. top-k: only the k most probable tokens, k = 0 keeps all;
3. top-p (nucleus, Holtzman et al., 2020): only the smallest set of most probable tokens
   whose probability reaches p, the most probable one always kept.

The draw is by inversion: one uniform number u per row and step, the token is the first whose
cumulative probability exceeds u times the total (one cumulative sum and a binary search per
row: about what greedy search's argmax costs); with top-k, over the k candidates that
`torch.topk` gives instead of the whole vocabulary; with top-p alone, over the nucleus that
`transformer.decode.nucleus` finds without sorting the vocabulary (`nucleus_draw`). Sample j
of the sentence of input index i takes its numbers from its own generator, seeded by
stream_seed(stream_seed(seed, i), j), so a sentence's samples depend on the seed and its index
only, never on the batch it is decoded in or on `max_tokens`.
Hypotheses are scored by the model's own log P(Y | X) (not the reshaped distribution), so a
sample's score is what `Translator.score` gives the same pair. Banned tokens (pad, bos) and
forced prefix tokens (`transformer.decode.prefix`) behave as in the other searches.

Source: Edunov et al. (2018), "Understanding Back-Translation at Scale" (sampling beats beam
outputs for back-translation); Holtzman et al. (2020) for top-p.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch

from transformer.decode.ensemble import as_models
from transformer.decode.greedy import row_search
from transformer.decode.nucleus import many_weights, nucleus_weights, select_nucleus
from transformer.decode.search import Hypothesis, max_output_lengths

BLOCK = 64  # `draw`: tokens whose weights are summed together first


def stream_seed(seed: int, index: int) -> int:
    """The seed of a random stream derived from `seed`: a 63-bit hash of (seed, index)."""
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def tempered(log_probs: torch.Tensor, temperature: float) -> torch.Tensor:
    """Log-probabilities of the distribution proportional to exp(log p / T) (the module
    docstring, 1), normalised again (the nucleus reads its largest as a probability).

    Shape:
        log_probs: (R, V). output: (R, V).
    """
    if temperature == 1.0:
        return log_probs
    return torch.log_softmax(log_probs / temperature, dim=-1)  # (R, V)


def candidates(
    log_probs: torch.Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The tokens a row may draw and their weights: temperature, then top-k, then top-p.

    Top-k keeps few tokens, so they are drawn among candidates taken by `torch.topk` instead of
    over the whole vocabulary (ties at the last kept value are broken by topk), top-p within
    them; top-p alone keeps `transformer.decode.nucleus.nucleus_weights` (ties by token id).

    Args:
        log_probs: The model's next-token log-probabilities (-inf for banned tokens).
        temperature, top_k, top_p: See the module docstring (checked by `DecodeConfig`).

    Returns:
        (weights, tokens): weights proportional to the distribution over each row's
        candidates (float32; 0 for the padding of a shorter row) and the candidates' ids;
        tokens is None when every token is a candidate (no top-k).

    Shape:
        log_probs: (R, V). weights, tokens: (R, C), C = V or k.
    """
    V = log_probs.shape[-1]
    log_probs = tempered(log_probs, temperature)
    if not 0 < top_k < V and top_p >= 1.0:
        return log_probs.exp(), None  # (R, V)
    if not 0 < top_k < V:
        return nucleus_weights(log_probs, top_p), None  # (R, V)
    values, tokens = log_probs.topk(top_k, dim=-1)  # (R, V) -> (R, k), descending
    weights = (values - values[:, :1]).exp()  # (R, k)
    if top_p < 1.0:  # the nucleus of the top-k distribution: its sorted prefix of mass p
        before = weights.cumsum(dim=-1) - weights  # (R, k) mass of the heavier candidates
        weights = weights * (before < top_p * weights.sum(dim=-1, keepdim=True))
    return weights, tokens


def sampling_weights(
    log_probs: torch.Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0
) -> torch.Tensor:
    """The whole distribution a token is drawn from, up to a factor (`candidates`, spread
    over the vocabulary: 0 outside the candidates), for inspection and tests.

    Shape:
        log_probs: (R, V). output: (R, V).
    """
    weights, tokens = candidates(log_probs, temperature, top_k, top_p)
    if tokens is None:
        return weights
    return torch.zeros_like(log_probs).scatter_add_(1, tokens, weights)  # (R, C) -> (R, V)


def draw(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw: the first token whose cumulative weight exceeds u * total.

    The cumulative weights are those of blocks of `BLOCK` tokens first, then of the tokens of
    the one block that holds u * total (a cumulative sum over the whole vocabulary is a slow,
    serial pass on a CPU; a sum of blocks is not).

    Args:
        weights: Each row's distribution, up to a factor (`candidates`).
        uniforms: One number in [0, 1) per row.

    Returns:
        Positions in each row (token ids when the row is the whole vocabulary), always of a
        positive weight.

    Shape:
        weights: (R, V). uniforms: (R,). output: (R,) long.
    """
    R, V = weights.shape
    whole = V - V % BLOCK  # tokens in whole blocks
    sums = weights[:, :whole].reshape(R, -1, BLOCK).sum(dim=2)  # (R, V) -> (R, V // BLOCK)
    if whole < V:  # the last, shorter block
        sums = torch.cat([sums, weights[:, whole:].sum(dim=1, keepdim=True)], dim=1)  # (R, N)
    cumulative = sums.cumsum(dim=1)  # (R, N)
    target = uniforms.to(weights.dtype).unsqueeze(1) * cumulative[:, -1:]  # (R,) -> (R, 1)
    block = torch.searchsorted(cumulative, target, right=True).clamp_(max=sums.shape[1] - 1)
    target = target - (cumulative - sums).gather(1, block)  # (R, 1) left for the block
    index = block * BLOCK + torch.arange(BLOCK, device=weights.device)  # (R, 1) -> (R, BLOCK)
    inside = weights.gather(1, index.clamp(max=V - 1)) * (index < V)  # (R, BLOCK), 0 past V
    offset = torch.searchsorted(inside.cumsum(dim=1), target, right=True)  # (R, 1)
    tokens = index.gather(1, offset.clamp_(max=BLOCK - 1)).squeeze(1).clamp_(max=V - 1)  # (R,)
    # u * total can round up past the block's total: then take the block's last positive one
    zero = weights.gather(1, tokens.unsqueeze(1)).squeeze(1).eq(0)  # (R,)
    if bool(zero.any()):
        position = torch.arange(V, device=weights.device)  # (V,)
        end = (block[zero] + 1) * BLOCK  # (z, 1)
        positive = (weights[zero] > 0) & (position < end)  # (z, V)
        tokens[zero] = torch.where(positive, position, -1).max(dim=1).values  # (z, V) -> (z,)
    return tokens


def nucleus_draw(log_probs: torch.Tensor, top_p: float, uniforms: torch.Tensor) -> torch.Tensor:
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


@torch.no_grad()
def sample_search(
    model: torch.nn.Module | Sequence[torch.nn.Module],
    src: torch.Tensor,
    seeds: Sequence[int],
    src_key_padding_mask: torch.Tensor | None = None,
    num_samples: int = 1,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    length_penalty: float = 0.6,
    length_penalty_style: str = "gnmt",
    use_cache: bool = True,
    prefix: Sequence[Sequence[int]] | None = None,
) -> list[list[Hypothesis]]:
    """Draw `num_samples` outputs per sentence, batched and cached like greedy search.

    Args:
        model: A `Transformer` in eval mode, or a list of them (an ensemble).
        src: Source ids, right-padded with `pad_id`.
        seeds: One seed per sentence: its sample j draws from a generator seeded by
            `stream_seed(seeds[b], j)` (the `Translator` passes stream_seed(seed, i) for the
            sentence of input index i).
        src_key_padding_mask: True at padding; derived from `pad_id` when None.
        num_samples: Samples per sentence.
        temperature, top_k, top_p: The reshaping of the distribution (module docstring).
        max_len_a, max_len_b, length_penalty, length_penalty_style, use_cache, prefix: As in
            `greedy_search`.

    Returns:
        For each sentence, its `num_samples` hypotheses in draw order (not sorted).

    Shape:
        src: (B, S). seeds: B integers.
    """
    config = as_models(model)[0].config
    # enough numbers for the longest output a row can have (a prefix only lengthens it by one)
    lengths = src.ne(config.pad_id).sum(dim=1).cpu()  # (B, S) -> (B,)
    longest = max(max_output_lengths(lengths, max_len_a, max_len_b, config.max_positions))
    if prefix is not None:
        longest = max([longest, *(len(p) + 1 for p in prefix)])
    uniforms = torch.stack(
        [
            torch.rand(longest, generator=torch.Generator().manual_seed(stream_seed(s, j)))
            for s in seeds
            for j in range(num_samples)
        ]
    ).to(src.device)  # (B*n, L)

    def choose(log_probs: torch.Tensor, rows: torch.Tensor, step: int) -> torch.Tensor:
        if top_p < 1.0 and not 0 < top_k < log_probs.shape[-1]:  # the vocabulary's nucleus
            return nucleus_draw(tempered(log_probs, temperature), top_p, uniforms[rows, step])
        weights, tokens = candidates(log_probs, temperature, top_k, top_p)  # (R, C) each
        drawn = draw(weights, uniforms[rows, step])  # (R, C), (R,) -> (R,)
        return drawn if tokens is None else tokens.gather(1, drawn.unsqueeze(1)).squeeze(1)

    return row_search(
        model,
        src,
        src_key_padding_mask,
        choose,
        rows_per_sentence=num_samples,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
        length_penalty=length_penalty,
        length_penalty_style=length_penalty_style,
        use_cache=use_cache,
        prefix=prefix,
    )
