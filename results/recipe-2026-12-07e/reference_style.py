"""How the German references of Multi30k's splits differ in commas and clauses, and what that
does to BLEU (results/recipe-2026-12-07e/README.md, "Why EN->DE test2016 trails validation").

    python results/recipe-2026-12-07e/reference_style.py ../shared/data/multi30k \
        results/recipe-2026-12-07c/cov-en-de/multi30k_en-de.test_2016_flickr.hyp.de \
        results/recipe-2026-12-07e/cov-en-de.val.last.beam6.hyp.de

The two hypothesis files: the EN->DE `make demo` model of 2026-12-07 11:32 (the last
checkpoint, beam 6, its choice on validation) on test2016 and on the validation set. An
analysis, not part of any choice: nothing here feeds the recipe or the decoding.
"""

import re
import sys
from pathlib import Path

import sacrebleu

# A comma followed by a relative pronoun or a conjunction that opens a clause.
CLAUSE = re.compile(r",\s+(der|die|das|den|dem|deren|dessen|während|wobei|um|und)\b")


def per_line(lines: list[str], pattern: str | re.Pattern) -> float:
    """How often `pattern` occurs per line."""
    return sum(len(re.findall(pattern, line)) for line in lines) / len(lines)


def without_commas(lines: list[str]) -> list[str]:
    """The lines with every comma (and the space before it) removed."""
    return [re.sub(r"\s*,", "", line) for line in lines]


def main(argv: list[str] | None = None) -> int:
    """Print the comma and clause rates of each file, and BLEU with and without commas."""
    data, test_hyp, valid_hyp = (Path(a) for a in (sys.argv[1:] if argv is None else argv))
    read = lambda path: path.read_text(encoding="utf-8").splitlines()  # noqa: E731
    files = {
        "train.de": read(data / "train.de"),
        "val.de": read(data / "val.de"),
        "test_2016_flickr.de": read(data / "test_2016_flickr.de"),
        "test hypotheses": read(test_hyp),
        "validation hypotheses": read(valid_hyp),
    }
    for name, lines in files.items():
        print(f"{name}: commas/line {per_line(lines, ','):.3f}, clauses/line "
              f"{per_line(lines, CLAUSE):.3f}")  # fmt: skip
    for name, hyp, ref in (
        ("test2016", files["test hypotheses"], files["test_2016_flickr.de"]),
        ("validation", files["validation hypotheses"], files["val.de"]),
    ):
        plain = sacrebleu.corpus_bleu(hyp, [ref]).score
        bare = sacrebleu.corpus_bleu(without_commas(hyp), [without_commas(ref)]).score
        extra = sum(1 for h, r in zip(hyp, ref, strict=True) if "," in h and "," not in r)
        missing = sum(1 for h, r in zip(hyp, ref, strict=True) if "," not in h and "," in r)
        print(f"{name}: BLEU {plain:.2f}, without commas on both sides {bare:.2f}; a comma only "
              f"in the hypothesis {extra} sentences, only in the reference {missing}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
