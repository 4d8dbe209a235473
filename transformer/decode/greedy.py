"""Greedy decoding: the most probable token at every step (conventions in `decode.search`).

`row_search` is the loop behind it: every row (a sentence, or one of its samples) extends by
one token per step, chosen by a function of the step's log-probabilities, until eos or its
maximum length; greedy search chooses the argmax, sampling (`transformer.decode.sampling`)
draws at random with the same loop.
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

# choose(log_probs (R, V), rows (R,) original row of each live row, step) -> tokens (R,)
Chooser = Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]


@torch.no_grad()
def greedy_search(
    model: torch.nn.Module | Sequence[torch.nn.Module],
    src: torch.Tensor,
    src_key_padding_mask: torch.Tensor | None = None,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    length_penalty: float = 0.6,
    length_penalty_style: str = "gnmt",
    use_cache: bool = True,
    prefix: Sequence[Sequence[int]] | None = None,
) -> list[Hypothesis]:
    """Greedy decoding: the most probable token at every step, until eos or the maximum length.

    Sentences that emit eos (or reach their maximum) leave the live batch at once.

    Args:
        model: A `Transformer`, in eval mode; or a list of them (an ensemble,
            `transformer.decode.ensemble`).
        src: Source ids, padded with `pad_id`.
        src_key_padding_mask: True at padding; derived from `pad_id` when None.
        max_len_a, max_len_b: Maximum output length = a * source length + b (section 6.1).
        length_penalty: alpha, used only for `Hypothesis.score` (so that greedy scores compare
            with beam search scores).
        length_penalty_style: "gnmt" or "power" (see `length_penalty`).
        use_cache: Use the incremental key/value cache (False recomputes every prefix).
        prefix: Target ids each output must start with (`transformer.decode.prefix`), or None.

    Returns:
        One `Hypothesis` per source sentence, in input order.

    Shape:
        src: (B, S), right-padded: real tokens first, then `pad_id` (left padding is refused,
        see `start_decoding`). src_key_padding_mask: (B, S) bool, True at padding.
    """
    results = row_search(
        model,
        src,
        src_key_padding_mask,
        lambda log_probs, rows, step: log_probs.argmax(dim=-1),  # (R, V) -> (R,)
        rows_per_sentence=1,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
        length_penalty=length_penalty,
        length_penalty_style=length_penalty_style,
        use_cache=use_cache,
        prefix=prefix,
    )
    return [hypotheses[0] for hypotheses in results]


def row_search(
    model: torch.nn.Module | Sequence[torch.nn.Module],
    src: torch.Tensor,
    src_key_padding_mask: torch.Tensor | None,
    choose: Chooser,
    rows_per_sentence: int,
    max_len_a: float,
    max_len_b: int,
    length_penalty: float,
    length_penalty_style: str,
    use_cache: bool = True,
    prefix: Sequence[Sequence[int]] | None = None,
) -> list[list[Hypothesis]]:
    """Extend every row by the token `choose` picks, until eos or the maximum length.

    Sentence b owns rows b * n ... b * n + n - 1 (n = `rows_per_sentence`); each row is an
    independent hypothesis, scored by the model's log-probabilities (whatever distribution
    `choose` draws from). Rows that are done leave the live batch at once.

    Args:
        model, src, src_key_padding_mask, max_len_a, max_len_b, length_penalty,
            length_penalty_style, use_cache, prefix: As in `greedy_search`.
        choose: (log_probs, rows, step) -> the next token of every live row, where `rows`
            holds the original row number of each live row and `step` the 0-based output
            position; it must pick a token of finite log-probability.
        rows_per_sentence: n, hypotheses per sentence.

    Returns:
        For each sentence, its n hypotheses in row order.

    Shape:
        src: (B, S). choose: log_probs (R, V) and rows (R,) long -> tokens (R,) long.
    """
    length_penalty_value = length_penalty_function(length_penalty, length_penalty_style)
    eos_id = as_models(model)[0].config.eos_id
    decoder, max_lens = start_decoding(
        model, src, src_key_padding_mask, max_len_a, max_len_b, use_cache, prefix
    )
    n = rows_per_sentence
    total = src.shape[0] * n
    if n > 1:
        decoder.reorder(torch.arange(src.shape[0], device=src.device).repeat_interleave(n))
        # (B, ...) -> (B*n, ...): n rows per sentence
    bos_id = decoder.models[0].config.bos_id
    live = list(range(total))  # original row of each live row
    rows = torch.arange(total, device=src.device)
    tokens = torch.full((total,), bos_id, dtype=torch.long, device=src.device)
    history = tokens.new_empty((total, 0))  # (R, t) output so far
    log_prob = torch.zeros(total, device=src.device)
    results: list[Hypothesis | None] = [None] * total
    length = 0
    while live:
        log_probs = decoder.log_probs(tokens)  # (R, V)
        tokens = choose(log_probs, rows, length)  # (R, V) -> (R,)
        log_prob = log_prob + log_probs.gather(1, tokens.unsqueeze(1)).squeeze(1)  # (R,)
        history = torch.cat((history, tokens.unsqueeze(1)), dim=1)  # (R, t) -> (R, t+1)
        length += 1
        ended = tokens.eq(eos_id).tolist()
        done = [e or max_lens[r // n] == length for r, e in zip(live, ended, strict=True)]
        if not any(done):
            continue
        for row in (r for r, d in enumerate(done) if d):
            out = history[row, : length - 1] if ended[row] else history[row]
            results[live[row]] = make_hypothesis(
                out.tolist(), float(log_prob[row]), ended[row], length_penalty_value
            )
        keep = [r for r, d in enumerate(done) if not d]
        if not keep:
            break
        index = torch.tensor(keep, device=src.device)
        decoder.reorder(index)
        live = [live[r] for r in keep]
        tokens, history, log_prob = tokens[index], history[index], log_prob[index]
        rows = rows[index]
    assert all(r is not None for r in results)
    return [results[b * n : (b + 1) * n] for b in range(src.shape[0])]
