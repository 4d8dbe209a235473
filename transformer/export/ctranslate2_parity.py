"""Parity of an exported CTranslate2 model with our decoder, on real sentences.

Float32 exports must reproduce our searches (`transformer.export.ctranslate2_translate` sets
the options): greedy outputs and beam-search outputs (with our `length_penalty_style: power`,
CTranslate2's score / |Y|^alpha) token-identical on at least `min_identical` of the sentences.
The log-probabilities CTranslate2 assigns to our greedy outputs are compared too; ours are
renormalised over the vocabulary without <pad> and <s>, which the export bans by a bias.

Quantized exports (int8, int16, float16) cannot be token-identical; they pass when their BLEU
is within `max_bleu_drop` of ours on the given references, or, without references, when at
least `MIN_QUANTIZED_IDENTICAL` of their outputs are identical to ours: a guard against a broken
conversion (which agrees on almost none), not a quality claim: int8 agrees on 90% (greedy) and
92% (beam 4) of the Multi30k test sentences with a trained model, at the same BLEU
(BENCHMARKS.md). The export command checks a float32 twin exactly too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from transformer.evaluate.bleu import corpus_scores
from transformer.export.ctranslate2_translate import score_ids, translate_ids
from transformer.export.extra import import_extra
from transformer.export.parity import (
    ParityResult,
    decode_ids,
    identical_share_passes,
    teacher_forced_logits,
)

MIN_QUANTIZED_IDENTICAL = 0.5


def _max_log_prob_difference(model, tokenizer, translator, sources, outputs) -> float:
    """Largest |log P| difference, CTranslate2 vs ours (renormalised without <pad>, <s>), over
    the tokens and final eos of our greedy `outputs`, teacher-forced, in batches of 32."""
    config = model.config
    worst = 0.0
    for start in range(0, len(sources), 32):
        src, tgt = sources[start : start + 32], outputs[start : start + 32]
        _, _, _, logits = teacher_forced_logits(model, src, tgt)  # (B, T, V)
        logits[..., [config.pad_id, config.bos_id]] = float("-inf")
        log_probs = torch.log_softmax(logits, dim=-1)
        theirs = score_ids(translator, tokenizer, src, tgt)
        for row, (target, scores) in enumerate(zip(tgt, theirs, strict=True)):
            expected = [*target, config.eos_id]
            ours = log_probs[row, torch.arange(len(expected)), torch.tensor(expected)]
            difference = (ours - torch.tensor(scores)).abs().max().item()
            worst = max(worst, difference)
    return worst


def check_ctranslate2(
    model: torch.nn.Module,
    tokenizer,
    model_dir: str | Path,
    sentences: Sequence[str],
    quantization: str | None = None,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    threads: int = 1,
    min_identical: float = 0.99,
    references: Sequence[str] | None = None,
    max_bleu_drop: float = 0.5,
    target_lang: str = "de",
) -> list[ParityResult]:
    """Compare a CTranslate2 model directory with our model: greedy, then beam search.

    Args:
        model: Our `Transformer`, in eval mode.
        tokenizer: Its `Tokenizer`.
        model_dir: A directory written by `export_ctranslate2`.
        sentences: Source sentences (empty ones are skipped).
        quantization: The directory's weight type: None (float32, checked token by token) or
            "int8" / "int16" / "float16" (checked by BLEU, see the module docstring).
        beam_size: Beams of the beam-search comparison (greedy is always compared).
        length_penalty: alpha of |Y|^alpha for both beam searches.
        max_len_a, max_len_b: Maximum output length = a * source tokens + b.
        threads: CTranslate2's intra-op threads.
        min_identical: Share of token-identical sentences a float32 export needs (0 to 1).
        references: Reference translations of `sentences`, for the BLEU criterion.
        max_bleu_drop: Largest BLEU loss a quantized export may show against ours.
        target_lang: sacreBLEU's target language.

    Returns:
        One `ParityResult` per search (greedy, then beam `beam_size`).

    Raises:
        MissingExtraError: when ctranslate2 is not installed.
        ValueError: when `references` and `sentences` differ in length, or no sentence has
            source tokens.
    """
    ctranslate2 = import_extra("ctranslate2")
    if references is not None and len(references) != len(sentences):
        raise ValueError(f"{len(references)} references for {len(sentences)} sentences")
    encoded = tokenizer.encode_batch(list(sentences))
    kept = [i for i, ids in enumerate(encoded) if ids]
    if not kept:
        raise ValueError("no check sentence has source tokens")
    sources = [encoded[i] for i in kept]
    compute_type = "float32" if quantization is None else "default"
    translator = ctranslate2.Translator(
        str(model_dir), device="cpu", compute_type=compute_type, intra_threads=threads
    )
    limits = dict(max_len_a=max_len_a, max_len_b=max_len_b)
    kind = quantization or "float32"
    results = []
    for beams in (1, beam_size):
        ours = decode_ids(model, sources, beams, length_penalty, "power", **limits)
        theirs = translate_ids(
            translator,
            tokenizer,
            sources,
            beams,
            length_penalty,
            max_positions=model.config.max_positions,
            **limits,
        )
        identical = sum(a == b for a, b in zip(ours, theirs, strict=True))
        search = "greedy" if beams == 1 else f"beam {beams}, length penalty |Y|^{length_penalty:g}"
        difference = None
        if beams == 1:
            difference = _max_log_prob_difference(model, tokenizer, translator, sources, ours)
        if quantization is None:
            passed = identical_share_passes(identical, len(sources), min_identical)
            criterion, note = f"identical >= {100 * min_identical:g}%", ""
        else:
            passed, criterion, note = _quantized_verdict(
                tokenizer, ours, theirs, identical, kept, references, max_bleu_drop, target_lang
            )
        results.append(
            ParityResult(
                engine=f"ctranslate2 {kind}, {search}",
                sentences=len(sources),
                identical=identical,
                max_difference=difference,
                difference_kind="log-prob",
                passed=passed,
                criterion=criterion,
                note=note,
            )
        )
        if beam_size == 1:
            break
    return results


def _quantized_verdict(
    tokenizer, ours, theirs, identical, kept, references, max_bleu_drop, target_lang
):
    """(passed, criterion, note) of a quantized export (see the module docstring)."""
    if references is not None:
        our_text = tokenizer.decode_batch(ours)
        their_text = tokenizer.decode_batch(theirs)
        refs = [references[i] for i in kept]
        our_bleu = corpus_scores(our_text, refs, target_lang)["bleu"]
        their_bleu = corpus_scores(their_text, refs, target_lang)["bleu"]
        passed = their_bleu >= our_bleu - max_bleu_drop
        note = f"BLEU {their_bleu:.2f} vs ours {our_bleu:.2f}"
        return passed, f"BLEU within {max_bleu_drop:g} of ours", note
    passed = identical_share_passes(identical, len(ours), MIN_QUANTIZED_IDENTICAL)
    criterion = f"identical >= {100 * MIN_QUANTIZED_IDENTICAL:g}%, no references for BLEU"
    return passed, criterion, ""
