"""Parity of an exported Hugging Face directory with our model, as loaded by a user.

The directory is loaded the documented way (`MarianMTModel.from_pretrained`,
`AutoTokenizer.from_pretrained`), then compared with ours three ways:

1. tokenizer: the ids of every check sentence equal our SentencePiece ids;
2. teacher-forced logits, float32, in right-padded batches (sources and targets of different
   lengths): every logit at a real target position within `max_logit_difference` (1e-4) of
   ours;
3. greedy `generate`: token-identical to our greedy search on at least `min_identical` of the
   sentences (with the same per-sentence length limit, see `generate_ids`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from transformer.decode.search import max_output_lengths
from transformer.export.extra import import_extra
from transformer.export.parity import (
    ParityResult,
    decode_ids,
    identical_share_passes,
    teacher_forced_logits,
)

BATCH = 32  # sentences per teacher-forced or generate batch


def load_huggingface(model_dir: str | Path):
    """(MarianMTModel in eval mode, tokenizer) from an exported directory, offline."""
    transformers = import_extra("transformers")
    marian = transformers.MarianMTModel.from_pretrained(str(model_dir)).eval()
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_dir))
    return marian, hf_tokenizer


@torch.no_grad()
def generate_ids(
    marian,
    sources: Sequence[Sequence[int]],
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    max_positions: int = 1024,
    num_beams: int = 1,
    batch_size: int = BATCH,
    **generate_options,
) -> list[list[int]]:
    """`marian.generate` on encoded sources, with our per-sentence length limit.

    Sentences are grouped by their limit floor(a * S + b) (capped at `max_positions`), which
    becomes `max_new_tokens` (the final eos included, as ours).

    Args:
        marian: A `MarianMTModel` (its generation config supplies the special ids).
        sources: Source ids per sentence.
        max_len_a, max_len_b, max_positions: As our searches.
        num_beams: 1 for greedy search.
        batch_size: Sentences per `generate` call.
        generate_options: Passed on (for example `length_penalty`).

    Returns:
        Output ids per sentence, without the decoder start and from the first eos on.
    """
    config = marian.generation_config
    lengths = torch.tensor([len(ids) for ids in sources], dtype=torch.long)
    limits = max_output_lengths(lengths, max_len_a, max_len_b, max_positions)
    order = sorted(range(len(sources)), key=lambda i: (limits[i], len(sources[i])))
    outputs: list[list[int]] = [[] for _ in sources]
    start = 0
    while start < len(order):
        limit = limits[order[start]]
        batch = [i for i in order[start : start + batch_size] if limits[i] == limit]
        start += len(batch)
        S = max(len(sources[i]) for i in batch)
        src = torch.full((len(batch), S), config.pad_token_id, dtype=torch.long)
        for row, i in enumerate(batch):
            src[row, : len(sources[i])] = torch.tensor(sources[i], dtype=torch.long)
        generated = marian.generate(
            input_ids=src,
            attention_mask=src.ne(config.pad_token_id).long(),
            max_new_tokens=limit,
            num_beams=num_beams,
            do_sample=False,
            **generate_options,
        )  # (B, 1 + t): the decoder start, then the tokens, eos, padding
        for row, i in zip(generated.tolist(), batch, strict=True):
            tokens = row[1:]
            if config.eos_token_id in tokens:
                tokens = tokens[: tokens.index(config.eos_token_id)]
            outputs[i] = tokens
    return outputs


def check_huggingface(
    model: torch.nn.Module,
    tokenizer,
    model_dir: str | Path,
    sentences: Sequence[str],
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    min_identical: float = 0.99,
    max_logit_difference: float = 1e-4,
) -> list[ParityResult]:
    """Compare an exported Hugging Face directory with our model (see the module docstring).

    Args:
        model: Our `Transformer`, float32, in eval mode.
        tokenizer: Its `Tokenizer`.
        model_dir: A directory written by `export_huggingface`.
        sentences: Source sentences (empty ones are skipped).
        max_len_a, max_len_b: Maximum output length = a * source tokens + b.
        min_identical: Share of sentences whose greedy output must be identical (0 to 1).
        max_logit_difference: Largest allowed |logit| difference.

    Returns:
        Three `ParityResult`s: tokenizer, teacher-forced logits, greedy generate.

    Raises:
        MissingExtraError: when transformers is not installed.
        ValueError: when no sentence has source tokens.
    """
    marian, hf_tokenizer = load_huggingface(model_dir)
    texts = [text for text in sentences if tokenizer.encode(text)]
    if not texts:
        raise ValueError("no check sentence has source tokens")
    sources = tokenizer.encode_batch(texts)
    hf_ids = hf_tokenizer(texts)["input_ids"]
    same_ids = sum(a == list(b) for a, b in zip(sources, hf_ids, strict=True))
    results = [
        ParityResult(
            engine="huggingface tokenizer",
            sentences=len(texts),
            identical=same_ids,
            max_difference=None,
            difference_kind="",
            passed=same_ids == len(texts),
            criterion="identical ids = 100%",
        )
    ]
    limits = dict(max_len_a=max_len_a, max_len_b=max_len_b)
    ours = decode_ids(model, sources, beam_size=1, **limits)
    worst, close = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(sources), BATCH):
            src_ids, tgt_ids = sources[start : start + BATCH], ours[start : start + BATCH]
            src, tgt_in, mask, logits = teacher_forced_logits(model, src_ids, tgt_ids)
            theirs = marian(
                input_ids=src,
                attention_mask=src.ne(model.config.pad_id).long(),
                decoder_input_ids=tgt_in,
            ).logits.float()  # (B, T, V)
            difference = (logits - theirs).abs().amax(dim=-1).masked_fill(~mask, 0.0)  # (B, T)
            worst = max(worst, difference.max().item())
            close += int(difference.amax(dim=1).le(max_logit_difference).sum())
    results.append(
        ParityResult(
            engine="huggingface float32, teacher-forced logits (padded batches)",
            sentences=len(texts),
            identical=close,
            max_difference=worst,
            difference_kind="logit",
            passed=worst <= max_logit_difference,
            criterion=f"max logit difference <= {max_logit_difference:g}",
            agreement=f"within {max_logit_difference:g}",
        )
    )
    theirs = generate_ids(marian, sources, max_positions=model.config.max_positions, **limits)
    identical = sum(a == b for a, b in zip(ours, theirs, strict=True))
    results.append(
        ParityResult(
            engine="huggingface float32, greedy generate",
            sentences=len(texts),
            identical=identical,
            max_difference=None,
            difference_kind="",
            passed=identical_share_passes(identical, len(texts), min_identical),
            criterion=f"identical >= {100 * min_identical:g}%",
        )
    )
    return results
