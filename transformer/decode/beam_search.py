"""Batched beam search with length penalty and early stopping (section 6.1 of the paper).

The K beams of every sentence are laid out together as rows `sentence * K + beam` of one decoder
batch. At each step every live beam is extended by every token; of the K * V candidates of a
sentence the best 2K are looked at (2K, so that K non-eos candidates remain even if K of them end
in eos):

- a candidate ending in `eos` that ranks within the best K is set aside as a finished hypothesis,
  scored log P / lp(|Y|) (conventions in `transformer.decode.search`);
- the best K candidates not ending in `eos` become the next step's beams (fewer valid ones leave
  placeholder beams with score -inf, e.g. at the first step, when all K beams are the same).

Live candidates all have the same length, so ranking them by log-probability is ranking them by
score. A sentence is done, and its rows leave the batch (`DecoderCache.reorder`), when

1. it has K finished hypotheses (the beam is full; with K = 1 this makes beam search greedy), or
2. it reached its maximum length (its live beams are kept as unfinished hypotheses), or
3. early stop: it has `nbest` finished hypotheses and no live beam can beat the `nbest`-th best,
   even in the best case. A live beam's log-probability only decreases, so its best reachable
   score is log P / max lp(l) over the lengths l it can still end with (|Y| + 1 ... maximum);
   this bound is exact, so early stopping never changes the result, it only saves steps.

Source: GNMT length penalty, Wu et al. (2016); candidate handling as in fairseq's sequence
generator; early-stopping bound as in tensor2tensor's beam search.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from transformer.decode.ensemble import as_models
from transformer.decode.search import (
    Hypothesis,
    length_penalty_function,
    make_hypothesis,
    start_decoding,
)


@torch.no_grad()
def beam_search(
    model: torch.nn.Module | Sequence[torch.nn.Module],
    src: torch.Tensor,
    src_key_padding_mask: torch.Tensor | None = None,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    length_penalty_style: str = "gnmt",
    nbest: int = 1,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    use_cache: bool = True,
    prefix: Sequence[Sequence[int]] | None = None,
) -> list[list[Hypothesis]]:
    """Beam search over a batch of sentences of different lengths.

    Args:
        model: A `Transformer`, in eval mode; or a list of them (an ensemble,
            `transformer.decode.ensemble`).
        src: Source ids, padded with `pad_id`.
        src_key_padding_mask: True at padding; derived from `pad_id` when None.
        beam_size: K, beams per sentence (the paper: 4).
        length_penalty: alpha of the length penalty (the paper: 0.6).
        length_penalty_style: "gnmt" ((5 + |Y|) / 6) ** alpha or "power" |Y| ** alpha.
        nbest: Hypotheses returned per sentence, 1 <= nbest <= beam_size
            (`DecodeConfig.check_nbest`).
        max_len_a, max_len_b: Maximum output length = a * source length + b (the paper: 1, 50).
        use_cache: Use the incremental key/value cache (False recomputes every prefix).
        prefix: Target ids each output must start with (`transformer.decode.prefix`), or None.

    Returns:
        For each sentence, in input order, its best hypotheses by score, best first (`nbest`
        of them, fewer only when the vocabulary allows fewer distinct outputs).

    Shape:
        src: (B, S), right-padded: real tokens first, then `pad_id` (left padding is refused,
        see `start_decoding`). src_key_padding_mask: (B, S) bool, True at padding.

    The settings are trusted: users' values are checked where they come in (`DecodeConfig`).
    """
    lp = length_penalty_function(length_penalty, length_penalty_style)
    config = as_models(model)[0].config
    device = src.device
    K = beam_size
    decoder, max_lens = start_decoding(
        model, src, src_key_padding_mask, max_len_a, max_len_b, use_cache, prefix
    )
    B = src.shape[0]
    decoder.reorder(torch.arange(B, device=device).repeat_interleave(K))  # (B, ...) -> (B*K, ...)

    live = list(range(B))  # original index of each live sentence
    scores = torch.full((B, K), float("-inf"), device=device)  # log P of each live beam
    scores[:, 0] = 0.0  # all beams start equal: keep one, the others are placeholders
    tokens = torch.full((B * K,), config.bos_id, dtype=torch.long, device=device)
    history = tokens.new_empty((B * K, 0))  # (n*K, t) output tokens of each beam
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    length = 0  # output tokens of every live beam
    while live:
        n = len(live)
        log_probs = decoder.log_probs(tokens)  # (n*K, V)
        V = log_probs.shape[-1]
        candidates = scores.unsqueeze(2) + log_probs.view(n, K, V)  # (n, K) + (n, K, V)
        flat = candidates.view(n, K * V)  # (n, K, V) -> (n, K*V)
        top_scores, top_index = flat.topk(min(2 * K, K * V), dim=1)  # (n, K*V) -> (n, 2K)
        top_beam = top_index.div(V, rounding_mode="floor")  # (n, 2K) beam of each candidate
        top_token = top_index.remainder(V)  # (n, 2K) token of each candidate
        is_eos = top_token.eq(config.eos_id)
        length += 1
        base = torch.arange(n, device=device).unsqueeze(1) * K  # (n, 1) first row of a sentence

        # 1. candidates ending in eos within the best K are finished hypotheses
        ended = is_eos[:, :K] & top_scores[:, :K].isfinite()  # (n, K)
        if ended.any():
            sentences = ended.nonzero()[:, 0].tolist()
            rows = (base + top_beam[:, :K])[ended]  # (E,) beam row that each eos extends
            prefixes = history[rows].tolist()
            log_probs_ended = top_scores[:, :K][ended].tolist()
            for i, prefix, log_prob in zip(sentences, prefixes, log_probs_ended, strict=True):
                finished[live[i]].append(make_hypothesis(prefix, log_prob, True, lp))

        # 2. the best K candidates not ending in eos are the next beams
        scores, pick = top_scores.masked_fill(is_eos, float("-inf")).topk(K, dim=1)  # (n, K)
        rows = (base + top_beam.gather(1, pick)).view(-1)  # (n, K) -> (n*K,) source beam rows
        tokens = top_token.gather(1, pick).view(-1)  # (n, K) -> (n*K,)
        tokens = tokens.masked_fill(scores.view(-1).isinf(), config.eos_id)  # placeholders
        history = torch.cat((history[rows], tokens.unsqueeze(1)), dim=1)  # (n*K, t+1)

        # 3. which sentences are done
        done = _done_sentences(scores, live, finished, max_lens, length, K, nbest, lp)
        for i in (i for i, d in enumerate(done) if d):
            if max_lens[live[i]] == length:  # keep the live beams, cut at the maximum length
                beams = history[i * K : (i + 1) * K].tolist()
                for beam, log_prob in zip(beams, scores[i].tolist(), strict=True):
                    if log_prob != float("-inf"):
                        finished[live[i]].append(make_hypothesis(beam, log_prob, False, lp))
        keep = [i for i, d in enumerate(done) if not d]
        if len(keep) < n:
            kept = torch.tensor(keep, dtype=torch.long, device=device)
            kept_rows = (kept.unsqueeze(1) * K + torch.arange(K, device=device)).view(-1)
            # (n', 1) * K + (K,) -> (n', K) -> (n' * K,): the beam rows of the kept sentences
            rows, tokens, history = rows[kept_rows], tokens[kept_rows], history[kept_rows]
            scores = scores[kept]
            live = [live[i] for i in keep]
        if live:
            decoder.reorder(rows)
    return [
        sorted(hypotheses, key=lambda h: h.score, reverse=True)[:nbest] for hypotheses in finished
    ]


def _done_sentences(
    scores: torch.Tensor,
    live: list[int],
    finished: list[list[Hypothesis]],
    max_lens: list[int],
    length: int,
    beam_size: int,
    nbest: int,
    lp: Callable[[int], float],
) -> list[bool]:
    """For each live sentence, whether its search is over (rules 1-3 of the module docstring).

    Args:
        scores: log P of each next beam (-inf for placeholders), best first.
        live: Original index of each live sentence.
        finished: Finished hypotheses of every original sentence.
        max_lens: Maximum output length of every original sentence.
        length: Output tokens of the live beams.
        beam_size: K.
        nbest: Hypotheses to return.
        lp: |Y| -> length penalty.

    Shape:
        scores: (n, K).
    """
    best_live = scores[:, 0].tolist()  # (n, K) -> (n,)
    done = []
    for i, sentence in enumerate(live):
        hypotheses = finished[sentence]
        if max_lens[sentence] == length or len(hypotheses) >= beam_size:
            done.append(True)
        elif best_live[i] == float("-inf"):
            done.append(True)  # no live beam left
        elif len(hypotheses) >= nbest:
            nth_best = sorted((h.score for h in hypotheses), reverse=True)[nbest - 1]
            largest_lp = max(lp(length + 1), lp(max_lens[sentence]))
            done.append(best_live[i] / largest_lp <= nth_best)
        else:
            done.append(False)
    return done
