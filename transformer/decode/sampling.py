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
row: about what greedy search's argmax costs; `transformer.decode.inversion`); with top-k,
over the k candidates that `torch.topk` gives instead of the whole vocabulary; with top-p
alone, by a proposal from the whole distribution kept when it is in the nucleus, else a draw
from the exact nucleus (`transformer.decode.nucleus_draw`). Sample j of the sentence of input
index i takes its numbers from its own generator, seeded by s = stream_seed(stream_seed(seed,
i), j), and top-p's further numbers (for rejected proposals) from one seeded by
stream_seed(s, -1), so a sentence's samples depend on the seed and its index only, never on
the batch it is decoded in or on `max_tokens`.
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
from transformer.decode.inversion import draw
from transformer.decode.nucleus import nucleus_weights
from transformer.decode.nucleus_draw import RETRIES, nucleus_draw
from transformer.decode.search import Hypothesis, max_output_lengths


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


def _uniforms(seeds: Sequence[int], length: int) -> torch.Tensor:
    """`length` uniform numbers in [0, 1) from a generator seeded by each seed.

    Shape:
        output: (len(seeds), length).
    """
    return torch.stack(
        [torch.rand(length, generator=torch.Generator().manual_seed(seed)) for seed in seeds]
    )


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
    streams = [stream_seed(s, j) for s in seeds for j in range(num_samples)]
    uniforms = _uniforms(streams, longest).to(src.device)  # (B*n, L)
    if top_p < 1.0:  # a second stream per sample: rejected proposals' numbers (nucleus_draw)
        k = RETRIES + 1  # (B*n, L*k) -> (B*n, L, k)
        retries = _uniforms([stream_seed(s, -1) for s in streams], longest * k).view(-1, longest, k)
        retries = retries.to(src.device)

    def choose(log_probs: torch.Tensor, rows: torch.Tensor, step: int) -> torch.Tensor:
        if top_p < 1.0 and not 0 < top_k < log_probs.shape[-1]:  # the vocabulary's nucleus
            tempered_log_probs = tempered(log_probs, temperature)  # (R, V)
            return nucleus_draw(
                tempered_log_probs, top_p, uniforms[rows, step], retries[rows, step]
            )
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
