"""Greedy decoding: the most probable token at every step (conventions in `decode.search`)."""

from __future__ import annotations

import torch

from transformer.decode.search import (
    Hypothesis,
    length_penalty_function,
    make_hypothesis,
    start_decoding,
)


@torch.no_grad()
def greedy_search(
    model: torch.nn.Module,
    src: torch.Tensor,
    src_key_padding_mask: torch.Tensor | None = None,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    length_penalty: float = 0.6,
    length_penalty_style: str = "gnmt",
    use_cache: bool = True,
) -> list[Hypothesis]:
    """Greedy decoding: the most probable token at every step, until eos or the maximum length.

    Sentences that emit eos (or reach their maximum) leave the live batch at once.

    Args:
        model: A `Transformer`, in eval mode.
        src: Source ids, padded with `pad_id`.
        src_key_padding_mask: True at padding; derived from `pad_id` when None.
        max_len_a, max_len_b: Maximum output length = a * source length + b (section 6.1).
        length_penalty: alpha, used only for `Hypothesis.score` (so that greedy scores compare
            with beam search scores).
        length_penalty_style: "gnmt" or "power" (see `length_penalty`).
        use_cache: Use the incremental key/value cache (False recomputes every prefix).

    Returns:
        One `Hypothesis` per source sentence, in input order.

    Shape:
        src: (B, S), right-padded: real tokens first, then `pad_id` (left padding is refused,
        see `start_decoding`). src_key_padding_mask: (B, S) bool, True at padding.
    """
    length_penalty_value = length_penalty_function(length_penalty, length_penalty_style)
    eos_id = model.config.eos_id
    decoder, max_lens = start_decoding(
        model, src, src_key_padding_mask, max_len_a, max_len_b, use_cache
    )
    batch_size = src.shape[0]
    live = list(range(batch_size))  # original sentence index of each row
    tokens = torch.full((batch_size,), model.config.bos_id, dtype=torch.long, device=src.device)
    history = tokens.new_empty((batch_size, 0))  # (R, t) output so far
    log_prob = torch.zeros(batch_size, device=src.device)
    results: list[Hypothesis | None] = [None] * batch_size
    length = 0
    while live:
        best, tokens = decoder.log_probs(tokens).max(dim=-1)  # (R, V) -> (R,)
        log_prob = log_prob + best
        history = torch.cat((history, tokens.unsqueeze(1)), dim=1)  # (R, t) -> (R, t+1)
        length += 1
        ended = tokens.eq(eos_id).tolist()
        done = [e or max_lens[s] == length for s, e in zip(live, ended, strict=True)]
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
    assert all(r is not None for r in results)
    return results
