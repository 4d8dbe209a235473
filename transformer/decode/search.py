"""What the searches share: hypotheses, the length penalty, and step-wise decoding.

Greedy search, beam search and sampling call `model.encode` once and then one incremental
`model.decode` step per output token (the self-attention key/value cache of
`transformer.model.cache`); sentences that are finished leave the live batch through
`DecoderCache.reorder`, so the batch shrinks as it is decoded. Every search also takes an
ensemble (a list of models, `transformer.decode.ensemble`) and target prefixes to force
(`transformer.decode.prefix`); both live in `StepDecoder`, so the searches never see them.

Conventions shared by the searches (section 6.1 of the paper):

- The decoder starts from `bos`; the output never contains `pad` or `bos` (their log-probabilities
  are set to -inf after the softmax over the full vocabulary, without renormalising, so a
  hypothesis' log-probability is exactly what a teacher-forced forward assigns to it).
- Maximum output length per sentence = floor(max_len_a * source length + max_len_b), at least 1
  and at most `model.config.max_positions` (the decoder input of the last step then fills the
  precomputed positional table). The source length counts the non-padding source tokens.
  A hypothesis that reaches the maximum without emitting `eos` is returned with
  `finished=False`; `eos` is never forced.
- |Y|, the length used by the length penalty, is the number of scored output tokens: the
  tokens plus the final `eos` when the hypothesis has one, never `bos`. It is the number of terms
  in log P(Y | X), and equals `Hypothesis.length`.
- score(Y) = log P(Y | X) / lp(|Y|), with lp(|Y|) = ((5 + |Y|) / 6) ** alpha (GNMT, Wu et al.,
  2016, equation 14; the paper's alpha = 0.6) or, with style "power", |Y| ** alpha (fairseq,
  Hugging Face).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from transformer.decode.ensemble import as_models, mean_probability
from transformer.decode.prefix import PrefixForcing, prefix_lengths


@dataclass(frozen=True)
class Hypothesis:
    """One decoded output sentence.

    Attributes:
        tokens: Output token ids, without `bos` and without the final `eos`.
        score: `log_prob / length_penalty(length)`, the quantity the search maximises.
        log_prob: log P(Y | X), summed over the output tokens and the final `eos` if any.
        length: |Y| = len(tokens) + 1 if `finished` else len(tokens).
        finished: True when the hypothesis ended with `eos`; False when it was cut at the
            maximum output length.
    """

    tokens: list[int]
    score: float
    log_prob: float
    length: int
    finished: bool


def length_penalty(length: int, alpha: float, style: str = "gnmt") -> float:
    """The length normaliser lp(|Y|) that divides a hypothesis' log-probability.

    Args:
        length: |Y|, output tokens including the final eos (see the module docstring).
        alpha: Strength; 0 disables the penalty (lp = 1), the paper uses 0.6.
        style: "gnmt": ((5 + |Y|) / 6) ** alpha (Wu et al., 2016, eq. 14);
            "power": |Y| ** alpha (fairseq, Hugging Face). The user's setting is checked by
            `DecodeConfig` (`LENGTH_PENALTY_STYLES`); this function trusts it.

    Returns:
        lp(|Y|) > 0.

    Source: GNMT, Wu et al. (2016), section 7; cited by Vaswani et al. (2017), section 6.1.
    """
    if style == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    assert style == "power", f"unknown length_penalty_style {style!r} (DecodeConfig checks it)"
    return float(length) ** alpha


def max_output_lengths(
    src_lengths: torch.Tensor, max_len_a: float, max_len_b: int, max_positions: int
) -> list[int]:
    """Per-sentence maximum output length: floor(a * source length + b), within [1, positions].

    Args:
        src_lengths: Number of non-padding source tokens of each sentence.
        max_len_a: Multiplier a of the source length (the paper: 1).
        max_len_b: Offset b (the paper: 50).
        max_positions: Positions the model supports (`ModelConfig.max_positions`).

    Returns:
        One maximum per sentence (output tokens, the final eos included): for any finite
        a, b >= 0, min(floor(a * S + b), max_positions), at least 1.

    Shape:
        src_lengths: (B,).
    """
    # Clamp while still in floating point: `.long()` of a double beyond 2**63 overflows. As
    # a * S >= 0, capping b at max_positions first leaves the result unchanged and keeps a huge
    # integer b out of float conversion.
    lengths = src_lengths.double() * float(max_len_a) + min(max_len_b, max_positions)  # (B,)
    return lengths.floor().clamp(1, max_positions).long().tolist()


class StepDecoder:
    """Feeds one new token per row to `model.decode` and returns next-token log-probabilities.

    With `use_cache` (the default for every search) it uses the incremental cache; without, it
    recomputes the decoder over the whole prefix at every step, a slow reference used by tests to
    check the cache. An ensemble (a list of models) averages its members' probabilities
    (`transformer.decode.ensemble`); a target prefix forces the first tokens of each row
    (`transformer.decode.prefix`). Either way the caller only sees `log_probs` and `reorder`.

    Args:
        models: The `Transformer`s (one, or an ensemble's members; in eval mode for
            deterministic output).
        memories: Each model's encoder output.
        memory_key_padding_mask: True at source padding.
        use_cache: Decode incrementally with a key/value cache.
        forcing: Target prefixes to force, if any.

    Shape:
        memories: M x (R, S, D). memory_key_padding_mask: (R, S). R rows (sentences, beams or
        samples).
    """

    def __init__(
        self,
        models: Sequence[torch.nn.Module],
        memories: Sequence[torch.Tensor],
        memory_key_padding_mask: torch.Tensor,
        use_cache: bool = True,
        forcing: PrefixForcing | None = None,
    ) -> None:
        self.models = list(models)
        self.memories = list(memories)
        self.memory_key_padding_mask = memory_key_padding_mask
        self.caches = [
            m.init_cache(x) if use_cache else None for m, x in zip(models, memories, strict=True)
        ]
        self.history: torch.Tensor | None = None  # (R, t) tokens fed so far, only without cache
        self.forcing = forcing
        self.step = 0  # output tokens chosen so far
        config = self.models[0].config
        self.banned = torch.tensor([config.pad_id, config.bos_id], device=memories[0].device)

    def log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        """Append one token per row and return log P(next token | prefix, source).

        Args:
            tokens: The newest token of every row (bos at the first step).

        Returns:
            Float32 log-probabilities over the target vocabulary, -inf at pad and bos (and,
            while a row's prefix lasts, at every token but the forced one).

        Shape:
            tokens: (R,). output: (R, V).
        """
        new = tokens.unsqueeze(1)  # (R,) -> (R, 1)
        if self.caches[0] is None:
            self.history = new if self.history is None else torch.cat((self.history, new), dim=1)
        members = []
        for model, memory, cache in zip(self.models, self.memories, self.caches, strict=True):
            mask = self.memory_key_padding_mask
            if cache is not None:
                logits = model.decode(new, memory, mask, cache=cache)
            else:
                logits = model.decode(self.history, memory, mask)
            members.append(torch.log_softmax(logits[:, -1].float(), dim=-1))  # (R, t, V) -> (R, V)
        log_probs = mean_probability(members)
        log_probs.index_fill_(1, self.banned, float("-inf"))
        if self.forcing is not None:
            log_probs = self.forcing.apply(log_probs, self.step)
        self.step += 1
        return log_probs

    def reorder(self, index: torch.Tensor) -> None:
        """Keep, reorder or repeat rows (beam reordering, dropping finished sentences).

        Shape:
            index: (R',) long; every row-indexed tensor goes from (R, ...) to (R', ...).
        """
        self.memories = [m.index_select(0, index) for m in self.memories]  # (R, S, D) -> (R', ..)
        self.memory_key_padding_mask = self.memory_key_padding_mask.index_select(0, index)
        for cache in self.caches:
            if cache is not None:
                cache.reorder(index)
        if self.history is not None:
            self.history = self.history.index_select(0, index)  # (R, t) -> (R', t)
        if self.forcing is not None:
            self.forcing.reorder(index)


def start_decoding(
    model: torch.nn.Module | Sequence[torch.nn.Module],
    src: torch.Tensor,
    src_key_padding_mask: torch.Tensor | None,
    max_len_a: float,
    max_len_b: int,
    use_cache: bool,
    prefix: Sequence[Sequence[int]] | None = None,
) -> tuple[StepDecoder, list[int]]:
    """Encode the source once (per model) and prepare step-wise decoding (shared by the
    searches).

    Args:
        model: A `Transformer`, or a list of them with one vocabulary (an ensemble).
        src: Source ids, padded with `pad_id`.
        src_key_padding_mask: True at padding; derived from `pad_id` when None.
        max_len_a, max_len_b: Maximum output length = a * source length + b.
        use_cache: See `StepDecoder`.
        prefix: Target ids to force at the start of each sentence's output (see
            `transformer.decode.prefix`; each shorter than `max_positions`), or None.

    Returns:
        The step decoder over B rows and each sentence's maximum output length (raised to
        its prefix + 1 where needed).

    Shape:
        src: (B, S), right-padded: each row's real tokens first, then `pad_id` (the positional
        encoding counts from column 0). src_key_padding_mask: (B, S) bool, True at padding.

    Raises:
        ValueError: when a row has padding before a real token (left padding), naming the
            first such row.
    """
    models = as_models(model)
    config = models[0].config
    if src_key_padding_mask is None:
        src_key_padding_mask = src.eq(config.pad_id)
    # A right-padded row's mask never goes from True (padding) back to False (a real token).
    left_padded = (src_key_padding_mask[:, :-1] & ~src_key_padding_mask[:, 1:]).any(dim=1)
    # (B, S - 1) -> (B,)
    if left_padded.any():
        raise ValueError(
            f"src row {int(left_padded.nonzero()[0])} has padding before a real token (sources "
            f"must be right-padded: real tokens first, then pad_id {config.pad_id}; the "
            "positional encoding counts from column 0)"
        )
    memories = [m.encode(src, src_key_padding_mask) for m in models]  # (B, S) -> (B, S, D)
    src_lengths = (~src_key_padding_mask).sum(dim=1)  # (B, S) -> (B,)
    positions = min(m.config.max_positions for m in models)
    max_lens = max_output_lengths(src_lengths, max_len_a, max_len_b, positions)
    forcing = None
    if prefix is not None and any(prefix):
        max_lens = prefix_lengths(max_lens, prefix, positions)
        forcing = PrefixForcing(prefix, src.device)
    decoder = StepDecoder(models, memories, src_key_padding_mask, use_cache, forcing)
    return decoder, max_lens


def make_hypothesis(
    tokens: list[int], log_prob: float, finished: bool, length_penalty_value: Callable[[int], float]
) -> Hypothesis:
    """Build a `Hypothesis`, computing |Y| and the length-normalised score.

    Args:
        tokens: Output ids without bos and eos.
        log_prob: log P(Y | X), eos included when `finished`.
        finished: Whether the hypothesis ended with eos.
        length_penalty_value: A function length -> lp(length).
    """
    length = len(tokens) + 1 if finished else len(tokens)
    return Hypothesis(
        tokens=tokens,
        score=log_prob / length_penalty_value(length),
        log_prob=log_prob,
        length=length,
        finished=finished,
    )


def length_penalty_function(alpha: float, style: str) -> Callable[[int], float]:
    """The function |Y| -> lp(|Y|) of one search (see `length_penalty`)."""
    return lambda length: length_penalty(length, alpha, style)
