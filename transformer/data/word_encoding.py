"""Encoding a corpus word by word: SentencePiece runs once per distinct word, not per sentence.

SentencePiece splits normalized text at spaces before it learns or applies pieces (its default
`split_by_whitespace`): no piece spans two words, so a sentence's ids are the ids of its
space-separated words, one after the other. A corpus of 4.5M pairs has about 200M words but
only a few hundred thousand distinct ones. `WordTable` gives every distinct word an id and
encodes each new word once with the run's SentencePiece model; a sentence then becomes token
ids by array lookups (numpy), which is what makes the preparation of WMT14 take minutes.

The same word counts train the SentencePiece model (`word_counts`, then `Tokenizer.train`
with `input_format="tsv"`): SentencePiece counts words before it learns BPE merges or unigram
pieces, so training on the words with their counts learns the model that training on the
sentences would (the tests compare both).

Words are split at ASCII spaces only (`str.split(" ")`), never at other characters: the
normalization of each word (NFKC, other whitespace becoming spaces) is SentencePiece's own,
applied when the word is encoded, so the ids equal `Tokenizer.encode` of the whole sentence.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable

import numpy as np


class WordTable:
    """Distinct words of one side of a corpus, each with its SentencePiece ids.

    Args:
        encode_batch: The side's `Tokenizer.encode_batch` (or `encode_target_batch`); None
            while the model is not trained yet (`word_ids` then only collects words).
        dtype: Token dtype of the encoded corpus (uint16 or int32).

    Shape:
        Word ids (W,) int64 for a chunk of W words; tokens flat (N,) of `dtype`.
    """

    def __init__(self, encode_batch: Callable[[list[str]], list[list[int]]] | None, dtype) -> None:
        self.encode_batch = encode_batch
        self.dtype = dtype
        self._ids: defaultdict[str, int] = defaultdict()
        self._ids.default_factory = self._ids.__len__  # a new word gets the next id
        self._pieces = np.zeros(0, dtype=dtype)  # the pieces of every encoded word, flat
        self._offsets = np.zeros(1, dtype=np.int64)  # word w: _pieces[_offsets[w]:_offsets[w+1]]

    def __len__(self) -> int:
        return len(self._ids)

    def word_ids(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The id of every word of `sentences` (new words get new ids) and words per sentence.

        Returns:
            (word ids (W,) int64, words per sentence (B,) int64; at least 1: "" is one word).
        """
        # One split of the joined chunk: the words of each sentence, in order (a third faster
        # than a split per sentence); a sentence has one word more than it has spaces.
        counts = np.fromiter(
            (sentence.count(" ") + 1 for sentence in sentences),
            dtype=np.int64,
            count=len(sentences),
        )
        words = " ".join(sentences).split(" ") if sentences else []
        ids = np.fromiter(map(self._ids.__getitem__, words), dtype=np.int64, count=len(words))
        return ids, counts

    def encode_new_words(self) -> None:
        """Encode the words added since the last call (SentencePiece batch encoding)."""
        known = len(self._offsets) - 1
        if known == len(self._ids):
            return
        new = list(itertools.islice(self._ids, known, None))  # ids are in insertion order
        encoded = self.encode_batch(new)
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        flat = np.fromiter(
            itertools.chain.from_iterable(encoded), dtype=self.dtype, count=int(lengths.sum())
        )
        self._pieces = np.concatenate([self._pieces, flat])
        self._offsets = np.concatenate([self._offsets, self._offsets[-1] + np.cumsum(lengths)])

    def tokens(self, word_ids: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token ids of sentences given as word ids (see `word_ids`).

        Returns:
            (flat tokens (N,) of `dtype`, tokens per sentence (B,) int64).

        Shape:
            word_ids (W,), counts (B,) with sum W -> tokens (N,), lengths (B,).
        """
        self.encode_new_words()
        return concatenate_pieces(self._pieces, self._offsets, word_ids, counts)

    def encode(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """`tokens(*word_ids(sentences))`: flat token ids and tokens per sentence."""
        return self.tokens(*self.word_ids(sentences))

    def counts(self, word_ids: np.ndarray) -> np.ndarray:
        """How often each word id occurs in `word_ids`, shape (len(self),)."""
        return np.bincount(word_ids, minlength=len(self._ids))

    def words(self) -> list[str]:
        """Every word, in id order."""
        return list(self._ids)


def concatenate_pieces(
    pieces: np.ndarray, offsets: np.ndarray, word_ids: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sentences given as word ids, as the concatenated pieces of their words.

    Args:
        pieces: The pieces of every word, flat; word w's are `pieces[offsets[w]:offsets[w+1]]`.
        offsets: int64 (number of words + 1,).
        word_ids: int64 word ids of the sentences, one after the other.
        counts: Words per sentence.

    Returns:
        (flat tokens (N,) of `pieces.dtype`, tokens per sentence (B,) int64).

    Shape:
        word_ids (W,), counts (B,) with sum W -> tokens (N,), lengths (B,).
    """
    starts = offsets[word_ids]  # (W,) first piece of each word
    per_word = offsets[word_ids + 1] - starts  # (W,) pieces of each word
    total = int(per_word.sum())
    # Concatenate the ranges [starts[w], starts[w] + per_word[w]): (W,) -> (N,).
    shift = np.repeat(starts - (np.cumsum(per_word) - per_word), per_word)
    tokens = pieces[shift + np.arange(total, dtype=np.int64)]
    first_word = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=first_word[1:])
    per_word_sum = np.concatenate([[0], np.cumsum(per_word)])
    lengths = per_word_sum[first_word + counts] - per_word_sum[first_word]  # (B,)
    return tokens, lengths


def word_counts(tables_and_counts: list[tuple[WordTable, np.ndarray]]) -> Counter:
    """Merge per-side word counts into one Counter of whitespace-free words (what SentencePiece
    trains on; a word that holds a tab or another space character counts as its parts).

    Args:
        tables_and_counts: (table, counts by word id) of each side that shares the model.

    Returns:
        word -> count, without empty words.
    """
    merged: Counter = Counter()
    for table, counts in tables_and_counts:
        for word, count in zip(table.words(), counts.tolist(), strict=True):
            if count == 0:
                continue
            if word.isprintable() and word.strip() == word and word:
                merged[word] += count
            else:  # other whitespace, control characters: SentencePiece's words are the parts
                for part in word.split():
                    merged[part] += count
    return merged
