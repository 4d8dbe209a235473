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

from transformer.atomic import atomic_write  # noqa: E402

CHUNK_PAIRS = 100_000  # pairs generated and written at a time (about 60 MB of arrays per side)
MIN_WORDS, MAX_WORDS = 4, 80  # words per line (whitespace-separated, punctuation attached)
MEDIAN_WORDS, SIGMA_WORDS = 21.0, 0.5  # lognormal length of the English line
TARGET_RATIO, TARGET_RATIO_SD = 0.95, 0.15  # German words / English words per pair
END_MARKS = (b".", b"?", b"!", b":", b"")  # the last word's punctuation, and its probabilities:
END_PROBS = (0.86, 0.03, 0.01, 0.02, 0.08)  # no mark at all for headlines and fragments

# Per language: letters (vowels, consonants) with relative frequencies, suffixes, the share of
# capitalised words, commas per word, and word length in letters = `length` = (a, b) in
# a + b * ln(rank + 1) + N(0, 1.3), clipped to [1, 22] (tuned to the bytes per word above).
LANGUAGES = {
    "en": {
        "vowels": {"e": 12.7, "a": 8.2, "o": 7.5, "i": 7.0, "u": 2.8, "y": 2.0, "é": 0.02},
        "consonants": {
            **{"t": 9.1, "n": 6.7, "s": 6.3, "h": 6.1, "r": 6.0, "d": 4.3, "l": 4.0, "c": 2.8},
            **{"m": 2.4, "w": 2.4, "f": 2.2, "g": 2.0, "p": 1.9, "b": 1.5, "v": 1.0, "k": 0.8},
            **{"j": 0.15, "x": 0.15, "q": 0.1, "z": 0.07, "ç": 0.005, "ñ": 0.005, "ø": 0.002},
        },
        "suffixes": ("ing", "ed", "ly", "tion", "s", "er", "ment", "ness", "al", "es", "ity"),
        "symbols": {12: "-", 150: "%", 400: "$", 900: "&", 2000: "–"},
        "capitalised": 0.12,
        "comma": 0.06,
        "length": (1.2, 0.58),
    },
    "de": {
        "vowels": {"e": 17.4, "i": 7.6, "a": 6.5, "u": 4.4, "o": 2.5, "ü": 1.0, "ä": 0.6},
        "consonants": {
            **{"n": 9.8, "s": 7.3, "r": 7.0, "t": 6.2, "d": 5.1, "h": 4.8, "l": 3.4, "c": 3.1},
            **{"g": 3.0, "m": 2.5, "b": 1.9, "w": 1.9, "f": 1.7, "k": 1.2, "z": 1.1, "p": 0.8},
            **{"v": 0.7, "ß": 0.3, "ö": 0.3, "j": 0.3, "é": 0.02, "ł": 0.005, "ç": 0.005},
        },
        "suffixes": ("en", "er", "ung", "ch", "keit", "lich", "ten", "sch", "heit", "chen", "ig"),
        "symbols": {12: "-", 150: "%", 400: "€", 900: "&", 2000: "–"},
        "capitalised": 0.40,
        "comma": 0.08,
        "length": (1.75, 0.66),
    },
}


def _draw(rng: np.random.Generator, letters: dict[str, float], size: int) -> np.ndarray:
    """`size` letters drawn with the relative frequencies of `letters`."""
    p = np.array(list(letters.values()))
    return np.array(list(letters))[rng.choice(len(p), size=size, p=p / p.sum())]


def _pseudo_words(rng: np.random.Generator, spec: dict, lengths: np.ndarray) -> list[str]:
    """Lowercase pseudo-words of the given letter counts: a vowel follows a consonant more
    often than another vowel; the first letter is ASCII; some end with one of the suffixes."""
    n, width = len(lengths), int(lengths.max())
    kinds = ("vowels", "consonants")
    ascii_ = {kind: {c: f for c, f in spec[kind].items() if c.isascii()} for kind in kinds}
    columns = []
    vowel = rng.random(n) < 0.3
    for i in range(width):
        pools = ascii_ if i == 0 else spec
        column = np.where(vowel, _draw(rng, pools["vowels"], n), _draw(rng, pools["consonants"], n))
        columns.append(column)
        vowel = rng.random(n) < np.where(vowel, 0.15, 0.7)
    rows = np.stack(columns, axis=1).tolist()
    suffixes = spec["suffixes"]
    suffix = rng.integers(len(suffixes), size=n).tolist()
    with_suffix = (rng.random(n) < 0.35).tolist()
    words = []
    for row, length, k, add in zip(rows, lengths.tolist(), suffix, with_suffix, strict=True):
        word = "".join(row[:length])
        if add and length > len(suffixes[k]) + 1:
            word = word[: length - len(suffixes[k])] + suffixes[k]
        words.append(word)
    return words


def _number(rng: np.random.Generator, language: str) -> str:
    """A number as written in running text: a year, a count, a decimal, thousands."""
    comma, point = (",", ".") if language == "en" else (".", ",")
    kind = rng.integers(4)
    if kind == 0:
        return str(rng.integers(1900, 2030))
    if kind == 1:
        return str(rng.integers(0, 1000))
    if kind == 2:
        return f"{rng.integers(0, 100)}{point}{rng.integers(0, 100)}"
    return f"{rng.integers(1, 1000)}{comma}{rng.integers(0, 1000):03d}"


def make_vocabulary(seed: int, size: int, language: str) -> list[str]:
    """`size` distinct words of `language`, most frequent first (see the module docstring).

    No two words differ only by the case of their first letter, so that capitalising the first
    word of a line never makes two words of one; no word ends with punctuation or is empty.
    """
    spec = LANGUAGES[language]
    rng = np.random.default_rng([seed, 1 + list(LANGUAGES).index(language), 0])
    ranks = np.arange(size)
    a, b = spec["length"]
    lengths = np.rint(a + b * np.log(ranks + 1) + rng.normal(0, 1.3, size))
    lengths = np.clip(lengths, 1, 22).astype(np.int64)
    words: list[str | None] = [None] * size
    taken: set[str] = set()
    for rank, symbol in spec["symbols"].items():
        if rank < size:
            words[rank] = symbol
            taken.add(symbol)
    is_number = (ranks >= 20) & (rng.random(size) < 0.015)
    for rank in np.flatnonzero(is_number).tolist():
        if words[rank] is None:
            while (word := _number(rng, language)) in taken:
                pass
            words[rank] = word
            taken.add(word)
    todo = [rank for rank in range(size) if words[rank] is None]
    while todo:  # a word already taken is drawn again, one letter longer
        retry = []
        for rank, word in zip(todo, _pseudo_words(rng, spec, lengths[todo]), strict=True):
            if word in taken:
                retry.append(rank)
            else:
                words[rank] = word
                taken.add(word)
        lengths[retry] += 1
        todo = retry
    capitalised = (ranks >= 30) & (rng.random(size) < spec["capitalised"])
    for rank in np.flatnonzero(capitalised).tolist():
        if words[rank][0].isalpha():
            words[rank] = words[rank][0].upper() + words[rank][1:]
    return words


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
