"""Write a synthetic parallel corpus shaped like WMT14 EN-DE, to time the data pipeline at scale.

    python benchmarks/make_corpus.py --pairs 4500000 --output /tmp/synth/train [--seed 1]
    python -m benchmarks.make_corpus --pairs 4500000 --output /tmp/synth/train [--words 300000]

Writes PREFIX.en and PREFIX.de: UTF-8, one sentence per line, the same number of lines, no
empty line. The text is nonsense, but what a tokenizer trainer or a batcher sees is WMT-like:

- words per line: lognormal (median 21, sigma 0.5), clipped to [4, 80], mean about 23.7 on the
  English side; the German line's length is the English one times N(0.95, 0.15), clipped alike;
- `--words` distinct words per side, drawn with a Zipf-like frequency (word of rank r has
  probability ln((r + 2) / (r + 1)) / ln(V + 1)), so that at 4.5M pairs every word occurs
  (SentencePiece's training time grows with the distinct words); frequent words are short;
- pseudo-words of lowercase letters, with each language's letter frequencies and suffixes (German
  with ä ö ü ß, both sides with a few rarer letters, so that character coverage matters), some
  capitalised (names; German nouns), numbers, a few symbols; the first word of a line is
  capitalised, commas and a final . ? ! or : are attached to words, as in raw text;
- about 6.0 bytes per word in English and 7.1 in German (separator included), as measured on
  newstest2012-2014: 1.37 GB for both files at 4.5M pairs (20 s on 2 cores).

The output is fixed by --seed and --words: pairs are generated in chunks of 100,000 from seeds of
their own, so a shorter corpus is the first lines of a longer one. Each file is written to a
temporary name and renamed when complete (`transformer.atomic`): an interrupted run (Ctrl-C:
exit status 130) leaves no half corpus. Prints one line: pairs, bytes, mean words per line and
distinct words used per side, seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as `python benchmarks/make_corpus.py`, not with -m:
    # import from the repo root, and take benchmarks/ off sys.path before torch is imported
    # (its cuda.py would shadow NVIDIA's `cuda` package, which torch imports if present)
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [str(_HERE.parent), *(p for p in sys.path if p != str(_HERE))]

import numpy as np  # noqa: E402

from benchmarks.pseudo_words import LANGUAGES, make_vocabulary  # noqa: E402
from transformer.atomic import atomic_write  # noqa: E402

CHUNK_PAIRS = 100_000  # pairs generated and written at a time (about 60 MB of arrays per side)
MIN_WORDS, MAX_WORDS = 4, 80  # words per line (whitespace-separated, punctuation attached)
MEDIAN_WORDS, SIGMA_WORDS = 21.0, 0.5  # lognormal length of the English line
TARGET_RATIO, TARGET_RATIO_SD = 0.95, 0.15  # German words / English words per pair
END_MARKS = (b".", b"?", b"!", b":", b"")  # the last word's punctuation, and its probabilities:
END_PROBS = (0.86, 0.03, 0.01, 0.02, 0.08)  # no mark at all for headlines and fragments


def word_table(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The words' UTF-8 bytes as rows of a zero-padded (V, W + 2) uint8 table (two spare
    columns for a punctuation mark and the separator), and their byte lengths (V,)."""
    encoded = [word.encode("utf-8") for word in words]
    width = max(map(len, encoded)) + 2
    table = np.frombuffer(b"".join(e.ljust(width, b"\0") for e in encoded), dtype=np.uint8)
    return table.reshape(len(words), width), np.array(list(map(len, encoded)), dtype=np.int64)


def render(table, byte_lengths, lengths, seed_key, comma: float) -> tuple[np.ndarray, np.ndarray]:
    """The text of `len(lengths)` lines of `lengths[i]` words each, as UTF-8 bytes.

    Word ids are Zipf-like (module docstring); each word but the last of a line takes a comma
    with probability `comma`, the last one a mark of END_MARKS; the first letter of a line is
    capitalised. Vectorised: the rows of the words are gathered from `table`, the mark and the
    separator written after each word, and the used bytes of every row kept, in order.

    Returns:
        (bytes of the text (uint8), word ids (T,)), T = lengths.sum().
    """
    T, V = int(lengths.sum()), len(table)
    ends = np.cumsum(lengths) - 1  # index of each line's last word
    rng = np.random.default_rng([*seed_key, 1])
    ids = np.exp(rng.random(T) * np.log(V + 1)).astype(np.int64) - 1
    ids = np.minimum(ids, V - 1)  # (T,)
    rng = np.random.default_rng([*seed_key, 2])
    marks = np.where(rng.random(T) < comma, ord(","), 0).astype(np.uint8)
    end_marks = np.array([m[0] if m else 0 for m in END_MARKS], dtype=np.uint8)
    rng = np.random.default_rng([*seed_key, 3])  # its own stream: a shorter corpus is a prefix
    marks[ends] = end_marks[rng.choice(len(END_MARKS), size=len(lengths), p=END_PROBS)]
    separators = np.full(T, ord(" "), dtype=np.uint8)
    separators[ends] = ord("\n")
    rows = table[ids]  # (T, W + 2)
    token, at = np.arange(T), byte_lengths[ids]
    marked = marks != 0
    rows[token, at] = np.where(marked, marks, separators)
    rows[token[marked], at[marked] + 1] = separators[marked]
    starts = ends - lengths + 1
    first = rows[starts, 0]
    lower = (first >= ord("a")) & (first <= ord("z"))
    rows[starts[lower], 0] -= ord("a") - ord("A")
    keep = np.arange(rows.shape[1]) < (at + 1 + marked)[:, None]  # (T, W + 2)
    return rows[keep], ids


def write_corpus(
    prefix: Path, pairs: int, seed: int, words: int, median_words: float = MEDIAN_WORDS
) -> dict[str, dict]:
    """Write `prefix`.en and `prefix`.de (module docstring); returns per side its "bytes",
    "words" (total) and "distinct" (words of the vocabulary used)."""
    sides = {}
    for language in LANGUAGES:
        table, byte_lengths = word_table(make_vocabulary(seed, words, language))
        seen = np.zeros(words, dtype=bool)
        sides[language] = {"table": table, "lengths": byte_lengths, "seen": seen, "bytes": 0}
        sides[language]["words"] = 0

    def write_both(files: dict) -> None:
        for chunk, start in enumerate(range(0, pairs, CHUNK_PAIRS)):
            n = min(CHUNK_PAIRS, pairs - start)
            rng = np.random.default_rng([seed, 100, chunk, 0])
            en = np.exp(rng.normal(np.log(median_words), SIGMA_WORDS, CHUNK_PAIRS))[:n]
            ratio = rng.normal(TARGET_RATIO, TARGET_RATIO_SD, CHUNK_PAIRS)[:n]
            en = np.clip(np.rint(en), MIN_WORDS, MAX_WORDS).astype(np.int64)
            de = np.clip(np.rint(en * ratio), MIN_WORDS, MAX_WORDS).astype(np.int64)
            for k, (language, lengths) in enumerate((("en", en), ("de", de))):
                side = sides[language]
                key, comma = (seed, 101 + k, chunk), LANGUAGES[language]["comma"]
                text, ids = render(side["table"], side["lengths"], lengths, key, comma)
                files[language].write(text)
                side["seen"][ids] = True
                side["bytes"] += len(text)
                side["words"] += int(lengths.sum())
        for file in files.values():  # both on disk before either is renamed: the renames
            file.flush()  # follow each other at once, so Ctrl-C cannot fall between them
            os.fsync(file.fileno())

    paths = {language: prefix.with_name(f"{prefix.name}.{language}") for language in LANGUAGES}
    atomic_write(
        paths["en"],
        lambda en: atomic_write(paths["de"], lambda de: write_both({"en": en, "de": de})),
    )
    return {
        language: {"bytes": s["bytes"], "words": s["words"], "distinct": int(s["seen"].sum())}
        for language, s in sides.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, required=True, help="sentence pairs to write")
    parser.add_argument(
        "--output", required=True, metavar="PREFIX", help="writes PREFIX.en and PREFIX.de"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--words", type=int, default=300_000, help="vocabulary size per side")
    parser.add_argument(
        "--median-words",
        type=float,
        default=MEDIAN_WORDS,
        help=f"median words of an English line (default {MEDIAN_WORDS:g}, as newstest)",
    )
    args = parser.parse_args(argv)
    prefix = Path(args.output)
    if args.pairs < 1:
        parser.error(f"--pairs ({args.pairs}) must be at least 1")
    if args.words < 100:
        parser.error(f"--words ({args.words}) must be at least 100")
    if not MIN_WORDS <= args.median_words <= MAX_WORDS:
        parser.error(f"--median-words ({args.median_words}) must be in [{MIN_WORDS}, {MAX_WORDS}]")
    if args.seed < 0:
        parser.error(f"--seed ({args.seed}) must be at least 0")
    if not args.output or not prefix.name or args.output.endswith(("/", "\\")):
        parser.error(f"--output ({args.output!r}) must name a file prefix, e.g. /tmp/synth/train")
    if not prefix.parent.is_dir():
        parser.error(f"--output {args.output}: the directory {prefix.parent} does not exist")
    start = time.perf_counter()
    try:
        sides = write_corpus(prefix, args.pairs, args.seed, args.words, args.median_words)
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
    except OSError as error:  # disk full, no permission: nothing is left behind
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 1
    report = "; ".join(
        f"{language}: {s['bytes']} bytes, {s['words'] / args.pairs:.2f} words/line, "
        f"{s['distinct']} distinct words"
        for language, s in sides.items()
    )
    print(f"{prefix}.{{en,de}}: {args.pairs} pairs; {report}; {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
