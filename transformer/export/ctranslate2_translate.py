"""Translate with an exported CTranslate2 model under our decoding conventions.

`transformer.decode.search` fixes how our greedy and beam searches behave; these CTranslate2
options reproduce them:

- `min_decoding_length=0`: an immediate `</s>` is an empty translation (CTranslate2's default of
  1 would force one token first);
- `return_end_token=True`: the final `</s>` counts in the length of the length penalty, as our
  |Y| does; it is removed from the returned tokens;
- `length_penalty=alpha` is CTranslate2's score / |Y|^alpha, our `length_penalty_style: power`
  (GNMT's ((5 + |Y|) / 6)^alpha has no CTranslate2 counterpart);
- the maximum output length, floor(a * source tokens + b) capped at `max_positions`, is per
  sentence for us and per call for CTranslate2 (`max_decoding_length`), so sentences are
  translated in groups of equal limit (in practice, of equal source length);
- `max_input_length=0`: sources are never cut.

`<pad>` and `<s>` are never produced: the exported output layer carries a large negative bias
there (`transformer.export.ctranslate2.BANNED_LOGIT`). One difference remains: CTranslate2's
softmax then runs over the other tokens, while our searches set the two log-probabilities to
-inf after the full softmax. Scores differ by log(1 - p(<pad>) - p(<s>)) a step: nothing for a
trained model (its outputs are token-identical on 1000 of 1000 Multi30k test sentences,
BENCHMARKS.md), enough to reorder near-tied beams of a random one.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from transformer.decode.search import max_output_lengths


def decoding_options(beam_size: int, length_penalty: float) -> dict:
    """Keyword arguments of `ctranslate2.Translator.translate_batch` matching our searches.

    Args:
        beam_size: 1 for greedy search, else K beams.
        length_penalty: alpha of |Y|^alpha (our `length_penalty_style: power`).

    Returns:
        The options (without `max_decoding_length`, which `translate_ids` sets per group).
    """
    return dict(
        beam_size=beam_size,
        patience=1,
        num_hypotheses=1,
        length_penalty=length_penalty,
        min_decoding_length=0,
        return_end_token=True,
        max_input_length=0,
    )


def translate_ids(
    translator,
    tokenizer,
    sources: Sequence[Sequence[int]],
    beam_size: int = 4,
    length_penalty: float = 0.6,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    max_positions: int = 1024,
    max_tokens: int = 4096,
) -> list[list[int]]:
    """Translate encoded sources with a `ctranslate2.Translator`; our ids in, our ids out.

    Args:
        translator: A `ctranslate2.Translator` over a directory of `export_ctranslate2`.
        tokenizer: The model's `Tokenizer` (pieces <-> ids).
        sources: Source token ids, one non-empty list per sentence (no bos/eos).
        beam_size: 1 for greedy search, else beams per sentence.
        length_penalty: alpha of |Y|^alpha.
        max_len_a, max_len_b: Maximum output length = a * source tokens + b, as ours.
        max_positions: The model's `max_positions` (the cap of our searches).
        max_tokens: Source tokens per CTranslate2 batch (`batch_type="tokens"`).

    Returns:
        For each source, in order, the output ids without bos and the final eos.

    Raises:
        ValueError: for an empty source (our Translator never decodes one).
    """
    if any(len(ids) == 0 for ids in sources):
        raise ValueError("sources must be non-empty (an empty sentence is translated as '')")
    lengths = torch.tensor([len(ids) for ids in sources], dtype=torch.long)
    limits = max_output_lengths(lengths, max_len_a, max_len_b, max_positions)
    vocabulary = tokenizer.target_pieces(range(tokenizer.tgt_vocab_size))
    piece_ids = {piece: index for index, piece in enumerate(vocabulary)}
    eos_piece = vocabulary[tokenizer.eos_id]
    options = decoding_options(beam_size, length_penalty)
    groups: dict[int, list[int]] = {}
    for index, limit in enumerate(limits):
        groups.setdefault(limit, []).append(index)
    outputs: list[list[int]] = [[] for _ in sources]
    for limit, indices in sorted(groups.items()):
        batch = [tokenizer.source_pieces(sources[i]) for i in indices]
        results = translator.translate_batch(
            batch,
            max_decoding_length=limit,
            max_batch_size=max_tokens,
            batch_type="tokens",
            **options,
        )
        for index, result in zip(indices, results, strict=True):
            pieces = result.hypotheses[0]
            if pieces and pieces[-1] == eos_piece:
                pieces = pieces[:-1]
            outputs[index] = [piece_ids[piece] for piece in pieces]
    return outputs


def score_ids(
    translator,
    tokenizer,
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    max_tokens: int = 4096,
) -> list[list[float]]:
    """Per-token log-probabilities that CTranslate2 gives `targets` (teacher forcing).

    Args:
        translator: A `ctranslate2.Translator`.
        tokenizer: The model's `Tokenizer`.
        sources: Source ids per sentence.
        targets: Target ids per sentence, without bos and eos.

    Returns:
        For each sentence, log P of each target token and then of the final eos
        (len(target) + 1 values).
    """
    results = translator.score_batch(
        [tokenizer.source_pieces(ids) for ids in sources],
        [tokenizer.target_pieces(ids) for ids in targets],
        max_batch_size=max_tokens,
        batch_type="tokens",
        max_input_length=0,
    )
    return [list(result.log_probs) for result in results]
