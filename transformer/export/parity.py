"""What an export's parity check compares against: our own decoder, and how results are told.

An exported model is trusted only after it has been run beside ours on the same sentences
(`transformer.export.ctranslate2_parity`, `transformer.export.huggingface_parity`). This module
holds what both checks share: the built-in check sentences, our decoder's token ids for a list
of sources (`decode_ids`, the reference every engine is compared with), and `ParityResult`,
one line of the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transformer.data.batching import length_sorted_batches
from transformer.decode.beam_search import beam_search
from transformer.decode.greedy import greedy_search

# Checked when no --check-input is given: English and German captions (Multi30k's languages),
# short and long, with digits, punctuation and a compound; any model translates them, well or
# not, and parity is about the tokens, not their quality.
CHECK_SENTENCES = (
    "A man is riding a horse.",
    "Two young children are playing with a red ball in the park near the river.",
    "A woman in a blue jacket sells 12 apples at the market.",
    "People are waiting at the train station, some of them reading newspapers.",
    "Ein Hund läuft durch den Schnee.",
    "Drei Männer arbeiten auf einer Baustelle in der Stadt.",
    "Eine Frau mit Sonnenbrille sitzt auf einer Bank und liest ein Buch.",
    "Das Mädchen trägt ein rosa T-Shirt.",
)


@dataclass(frozen=True)
class ParityResult:
    """One comparison of an exported model with ours.

    Attributes:
        engine: What was compared, e.g. "ctranslate2 float32, beam 4".
        sentences: Sentences compared.
        identical: Sentences that agree with ours: token-identical outputs, or (for logits)
            every logit within the tolerance; `agreement` names which.
        max_difference: Largest absolute difference of `difference_kind` values, or None.
        difference_kind: "logit" or "log-prob" (what `max_difference` measures).
        passed: Whether the comparison met its criterion.
        criterion: The criterion, in words ("identical >= 99%").
        note: Extra figures (BLEU), or "".
        agreement: The word for `identical` in the report line.
    """

    engine: str
    sentences: int
    identical: int
    max_difference: float | None
    difference_kind: str
    passed: bool
    criterion: str
    note: str = ""
    agreement: str = "identical"

    def line(self) -> str:
        """One report line: `ENGINE: N sentences, M identical (P%), max logit difference D,
        NOTE: ok (CRITERION)` or `... : MISMATCH (CRITERION)`."""
        share = 100.0 * self.identical / self.sentences if self.sentences else 100.0
        parts = [f"{self.sentences} sentences, {self.identical} {self.agreement} ({share:.1f}%)"]
        if self.max_difference is not None:
            parts.append(f"max {self.difference_kind} difference {self.max_difference:.2e}")
        if self.note:
            parts.append(self.note)
        verdict = "ok" if self.passed else "MISMATCH"
        return f"{self.engine}: {', '.join(parts)}: {verdict} ({self.criterion})"


def identical_share_passes(identical: int, sentences: int, min_identical: float) -> bool:
    """Whether `identical` of `sentences` reaches the share `min_identical` (0 to 1)."""
    return identical >= min_identical * sentences - 1e-9


@torch.no_grad()
def decode_ids(
    model: torch.nn.Module,
    sources: Sequence[Sequence[int]],
    beam_size: int = 1,
    length_penalty: float = 0.6,
    length_penalty_style: str = "power",
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    max_tokens: int = 4096,
) -> list[list[int]]:
    """Our decoder's output ids for encoded sources: greedy (`beam_size` 1) or beam search.

    Batches are made as `Translator` makes them (`length_sorted_batches`), on the plain
    model (no oneDNN layer swap), which is what the exports hold.

    Args:
        model: Our `Transformer`, in eval mode.
        sources: Non-empty source ids per sentence.
        beam_size: 1 for `greedy_search`, else `beam_search` with this many beams.
        length_penalty, length_penalty_style: alpha and "gnmt" / "power".
        max_len_a, max_len_b: Maximum output length = a * source tokens + b.
        max_tokens: Source tokens per batch, padding included.

    Returns:
        Output ids per sentence (no bos, no final eos), in input order.
    """
    device = next(model.parameters()).device
    pad_id = model.config.pad_id
    settings = dict(
        length_penalty=length_penalty,
        length_penalty_style=length_penalty_style,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
    )
    outputs: list[list[int]] = [[] for _ in sources]
    for batch in length_sorted_batches([len(ids) for ids in sources], max_tokens):
        longest = max(len(sources[k]) for k in batch)
        src = torch.full((len(batch), longest), pad_id, dtype=torch.long)
        for row, k in enumerate(batch):
            src[row, : len(sources[k])] = torch.tensor(sources[k], dtype=torch.long)
        src = src.to(device)
        if beam_size == 1:
            hypotheses = greedy_search(model, src, **settings)
        else:
            hypotheses = [h[0] for h in beam_search(model, src, beam_size=beam_size, **settings)]
        for k, hypothesis in zip(batch, hypotheses, strict=True):
            outputs[k] = hypothesis.tokens
    return outputs


@torch.no_grad()
def teacher_forced_logits(
    model: torch.nn.Module, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One right-padded batch of (source, bos + target + eos) pairs and our logits for it.

    Args:
        model: Our `Transformer`.
        sources: Source ids per sentence.
        targets: Target ids per sentence (no bos, no eos).

    Returns:
        (src, tgt_in, target_mask, logits): src (B, S) and tgt_in (B, T) padded with pad_id;
        target_mask (B, T) bool, True at real target positions; logits (B, T, V) float32.
    """
    config = model.config
    device = next(model.parameters()).device
    B = len(sources)
    S = max(len(ids) for ids in sources)
    T = max(len(ids) for ids in targets) + 1  # bos + target, predicting target + eos
    src = torch.full((B, S), config.pad_id, dtype=torch.long)
    tgt_in = torch.full((B, T), config.pad_id, dtype=torch.long)
    target_mask = torch.zeros(B, T, dtype=torch.bool)
    for row, (source, target) in enumerate(zip(sources, targets, strict=True)):
        src[row, : len(source)] = torch.tensor(source, dtype=torch.long)
        tgt_in[row, : len(target) + 1] = torch.tensor([config.bos_id, *target], dtype=torch.long)
        target_mask[row, : len(target) + 1] = True
    logits = model(src.to(device), tgt_in.to(device)).float().cpu()  # (B, T, V)
    return src, tgt_in, target_mask, logits
