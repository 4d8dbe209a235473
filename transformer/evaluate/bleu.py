"""Corpus-level translation scores: sacreBLEU BLEU and chrF, and the paper's tokenized BLEU.

Two kinds of BLEU are reported, always labelled:

- **sacreBLEU** (Post, 2018, "A Call for Clarity in Reporting BLEU Scores"): detokenized
  hypotheses against raw references, with sacreBLEU's own tokenizer (13a by default) and a
  signature that pins every setting. This is the number to compare with other systems today.
- **Tokenized BLEU with compound splitting**: what the paper's 27.3 / 28.4 (Table 2) measure, as
  computed by tensor2tensor's `get_ende_bleu.sh`: tokenize hypotheses and references, rewrite
  every hyphenated compound `a-b` as `a ##AT##-##AT## b` (so a compound counts as three tokens),
  then BLEU on those tokens without further tokenization. That script tokenizes with Moses'
  `tokenizer.perl`; we use sacreBLEU's 13a tokenizer (the mteval-v13a rules), which splits
  punctuation the same way on almost all text, so the number is comparable but not bit-identical.

Both BLEUs and chrF come from `sacrebleu.metrics` called with the hypotheses first and the
references as a list of streams (one list of lines per reference translation).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

# tensor2tensor's get_ende_bleu.sh: perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'
_COMPOUND = re.compile(r"(\S)-(\S)")
_COMPOUND_REPLACEMENT = r"\1 ##AT##-##AT## \2"


def split_compounds(line: str) -> str:
    """Rewrite hyphenated compounds as `a ##AT##-##AT## b`, exactly as tensor2tensor's script.

    The substitution is the single left-to-right, non-overlapping pass of the Perl one-liner
    `s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g`, so a hyphen whose left neighbour was consumed by
    the previous match stays unsplit: `a-b-c` becomes `a ##AT##-##AT## b-c`, while
    `Hochzeits-Party-Test` becomes `Hochzeits ##AT##-##AT## Party ##AT##-##AT## Test`.

    Args:
        line: One tokenized sentence.

    Returns:
        The sentence with its compounds split.

    Source: tensor2tensor/utils/get_ende_bleu.sh.
    """
    return _COMPOUND.sub(_COMPOUND_REPLACEMENT, line)


def tokenize_for_paper_bleu(line: str) -> str:
    """Tokenize one sentence (13a rules), then split its compounds (`split_compounds`).

    Args:
        line: One detokenized sentence.

    Returns:
        Space-separated tokens, ready for BLEU with `tokenize="none"`.
    """
    return split_compounds(Tokenizer13a()(line.strip()))


def _as_streams(references: Sequence[str] | Sequence[Sequence[str]]) -> list[list[str]]:
    """One reference stream (a list of lines) or several, as a list of streams."""
    if len(references) > 0 and isinstance(references[0], str):
        return [list(references)]
    return [list(stream) for stream in references]


def _check_lengths(hypotheses: Sequence[str], streams: list[list[str]]) -> None:
    """Raise ValueError unless every reference stream has one line per hypothesis."""
    if not streams:
        raise ValueError("no reference streams given")
    for index, stream in enumerate(streams):
        if len(stream) != len(hypotheses):
            raise ValueError(
                f"{len(hypotheses)} hypotheses but reference stream {index} has "
                f"{len(stream)} lines; they must match line for line"
            )


def corpus_scores(
    hypotheses: Sequence[str],
    references: Sequence[str] | Sequence[Sequence[str]],
    target_lang: str = "de",
) -> dict:
    """Score detokenized hypotheses with sacreBLEU BLEU, chrF and the paper's tokenized BLEU.

    Args:
        hypotheses: One detokenized translation per segment.
        references: One reference stream (a list of lines, one per segment) or a list of
            such streams (several references per segment).
        target_lang: Target language code; sacreBLEU picks its default tokenizer from it
            (13a for most languages, special ones for zh / ja / ko).

    Returns:
        A dict of plain values:
        `bleu`, `chrf`, `tokenized_bleu` (floats, 0-100);
        `signatures`: {`bleu`, `chrf`, `tokenized_bleu`} (strings; the tokenized one is
        sacreBLEU's `tok:none` signature followed by `|pretok:13a+compound-split`);
        `bleu_detail`, `chrf_detail`, `tokenized_bleu_detail`: sacreBLEU's one-line summaries
        (n-gram precisions, brevity penalty, lengths);
        `bleu_bp`, `bleu_sys_len`, `bleu_ref_len`, `bleu_precisions`; `n_segments`.

    Raises:
        ValueError: when a reference stream's length differs from the number of hypotheses.

    Source: sacrebleu.metrics.BLEU / CHRF (Post, 2018); tensor2tensor get_ende_bleu.sh.
    """
    streams = _as_streams(references)
    hypotheses = list(hypotheses)
    _check_lengths(hypotheses, streams)

    bleu_metric = BLEU(trg_lang=target_lang)
    bleu = bleu_metric.corpus_score(hypotheses, streams)
    chrf_metric = CHRF()
    chrf = chrf_metric.corpus_score(hypotheses, streams)

    tokenized_metric = BLEU(tokenize="none", force=True)
    tokenized = tokenized_metric.corpus_score(
        [tokenize_for_paper_bleu(line) for line in hypotheses],
        [[tokenize_for_paper_bleu(line) for line in stream] for stream in streams],
    )
    signatures = {
        "bleu": str(bleu_metric.get_signature()),
        "chrf": str(chrf_metric.get_signature()),
        "tokenized_bleu": f"{tokenized_metric.get_signature()}|pretok:13a+compound-split",
    }
    return {
        "bleu": float(bleu.score),
        "chrf": float(chrf.score),
        "tokenized_bleu": float(tokenized.score),
        "signatures": signatures,
        "bleu_detail": bleu.format(width=2),
        "chrf_detail": chrf.format(width=2),
        "tokenized_bleu_detail": tokenized.format(width=2),
        "bleu_bp": float(bleu.bp),
        "bleu_sys_len": int(bleu.sys_len),
        "bleu_ref_len": int(bleu.ref_len),
        "bleu_precisions": [float(p) for p in bleu.precisions],
        "n_segments": len(hypotheses),
    }


def format_scores(scores: dict) -> str:
    """Human-readable, labelled lines for the output of `corpus_scores`.

    Args:
        scores: The dict returned by `corpus_scores`.

    Returns:
        Three lines: sacreBLEU BLEU, chrF (each with its signature) and the tokenized,
        compound-split BLEU comparable to the paper's Table 2.
    """
    signatures = scores["signatures"]
    return "\n".join(
        [
            f"sacreBLEU BLEU  = {scores['bleu']:.2f}  [{signatures['bleu']}]  "
            f"({scores['bleu_detail']})",
            f"sacreBLEU chrF2 = {scores['chrf']:.2f}  [{signatures['chrf']}]",
            f"tokenized BLEU (13a + compound split, comparable to the paper) = "
            f"{scores['tokenized_bleu']:.2f}  [{signatures['tokenized_bleu']}]",
        ]
    )
