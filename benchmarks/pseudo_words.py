"""The words of `benchmarks/make_corpus.py`'s synthetic corpus: pseudo-words per language.

`make_vocabulary(seed, size, language)` gives `size` distinct words, most frequent first:
lowercase pseudo-words with the language's letter frequencies and suffixes (German with
ä ö ü ß, both sides with a few rarer letters, so that character coverage matters), some
capitalised (names; German nouns), numbers as running text writes them, and a few symbols.
Frequent words are short (see `LANGUAGES`).
"""

from __future__ import annotations

import numpy as np

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
