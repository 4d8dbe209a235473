"""Word-by-word encoding: a sentence's ids are its words' ids, SentencePiece's own encoding of
the whole sentence being the reference, on text with every kind of spacing."""

from __future__ import annotations

from collections import Counter

import numpy as np

from transformer.data.tokenizer import Tokenizer
from transformer.data.word_encoding import WordTable, word_counts

ODD = [
    "",
    " ",
    "a  b",
    " leading and trailing ",
    "tab\tinside",
    "nbsp\u00a0inside and ideographic\u3000space",
    "full-width ＡＢＣ and ﬁ ligature",
    "ünïcödé Straße 12,000 €",
    "control\x1cchar and zero\u200bwidth",
]


def test_ids_equal_sentencepiece_on_whole_sentences(shared_data):
    from transformer.data.corpus import read_parallel

    text = read_parallel(str(shared_data / "multi30k" / "val"), "en", "de")
    tokenizer = Tokenizer(Tokenizer.train(text.src + text.tgt, 700))
    sentences = text.src + text.tgt + ODD
    table = WordTable(tokenizer.encode_batch, np.uint16)
    tokens, lengths = table.encode(sentences[:500])
    more, more_lengths = table.encode(sentences[500:])  # new and known words
    tokens, lengths = np.concatenate([tokens, more]), np.concatenate([lengths, more_lengths])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ours = [tokens[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    assert ours == tokenizer.encode_batch(sentences)
    assert tokens.dtype == np.uint16


def test_word_ids_and_counts():
    table = WordTable(None, np.int32)
    ids, per_sentence = table.word_ids(["a b a", "", "b  c"])
    assert per_sentence.tolist() == [3, 1, 3]  # "" is one (empty) word; "  " makes one too
    assert table.words() == ["a", "b", "", "c"]
    assert ids.tolist() == [0, 1, 0, 2, 1, 2, 3]
    assert table.counts(ids).tolist() == [2, 2, 2, 1]


def test_word_counts_merge_sides_and_split_odd_spaces():
    left, right = WordTable(None, np.int32), WordTable(None, np.int32)
    left_ids, _ = left.word_ids(["x y", "tab\tword"])
    right_ids, _ = right.word_ids(["y z", ""])
    counts = word_counts([(left, left.counts(left_ids)), (right, right.counts(right_ids))])
    assert counts == Counter({"y": 2, "x": 1, "z": 1, "tab": 1, "word": 1})
