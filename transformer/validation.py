"""Validation during training: loss, perplexity and sacreBLEU of greedy decoding.

BLEU goes through the same code as `transformer-evaluate`: `Translator.translate` for the
hypotheses and `bleu.corpus_scores` (sacreBLEU) for the score. Losses use natural logarithms:
perplexity = exp(nll per token).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from contextlib import AbstractContextManager

import torch

from transformer.bleu import corpus_scores
from transformer.config import DecodeConfig
from transformer.loss import label_smoothed_cross_entropy
from transformer.tokenizer import Tokenizer
from transformer.translator import Translator


@torch.no_grad()
def validation_loss(
    model: torch.nn.Module,
    batches: Iterable,
    epsilon: float,
    pad_id: int,
    device: torch.device,
    autocast: AbstractContextManager,
) -> dict:
    """Label-smoothed loss, NLL and perplexity per real target token over `batches`.

    Args:
        model: The (un-wrapped) Transformer; switched to eval mode.
        batches: Batches with `src`, `tgt_in`, `tgt_out` (see `BatchIterator`).
        epsilon: Label smoothing (the training loss's, so the two are comparable).
        pad_id: Padding id.
        device: Where the model is.
        autocast: The training precision's autocast context (re-entered per batch).

    Returns:
        {"loss", "nll_loss", "ppl", "tokens"}; losses are per token (natural log).
    """
    model.eval()
    loss_sum = nll_sum = 0.0
    tokens = 0
    for batch in batches:
        with autocast:
            logits = model(batch.src.to(device), batch.tgt_in.to(device))
        out = label_smoothed_cross_entropy(logits, batch.tgt_out.to(device), epsilon, pad_id)
        loss_sum += out.loss.item()
        nll_sum += out.nll_loss.item()
        tokens += int(out.n_tokens.item())
    tokens_or_one = max(tokens, 1)
    nll = nll_sum / tokens_or_one
    return {
        "loss": loss_sum / tokens_or_one,
        "nll_loss": nll,
        "ppl": math.exp(min(nll, 700.0)),
        "tokens": tokens,
    }


@torch.no_grad()
def validation_bleu(
    model: torch.nn.Module,
    tokenizer: Tokenizer,
    src_text: list[str],
    ref_text: list[str],
    target_lang: str,
    device: torch.device,
    decode: DecodeConfig,
) -> dict:
    """sacreBLEU of greedy decoding of `src_text` against `ref_text`.

    Args:
        model: The (un-wrapped) Transformer; switched to eval mode.
        tokenizer: The run's tokenizer.
        src_text: Raw source sentences.
        ref_text: One raw reference per source sentence.
        target_lang: Target language code (sacreBLEU tokenizer choice).
        device: Where the model is.
        decode: The `decode:` section (max_tokens per batch, max_len_a, max_len_b).

    Returns:
        {"bleu": float, "chrf": float} (whatever `corpus_scores` reports under those keys).
    """
    model.eval()
    translator = Translator(model, tokenizer, device=device)
    hyps = translator.translate(
        src_text,
        greedy=True,
        max_len_a=decode.max_len_a,
        max_len_b=decode.max_len_b,
        max_tokens=decode.max_tokens,
    )
    scores = corpus_scores(hyps, ref_text, target_lang=target_lang)
    return {key: float(scores[key]) for key in ("bleu", "chrf") if key in scores}


# Lower is better for every metric except BLEU and chrF.
HIGHER_IS_BETTER = {"bleu": True, "chrf": True, "loss": False, "nll_loss": False, "ppl": False}


def is_improvement(metric: str, value: float, best: float | None) -> bool:
    """True when `value` of `metric` beats `best` (always, when there is no best yet)."""
    if best is None:
        return True
    return value > best if HIGHER_IS_BETTER[metric] else value < best
