"""Encoding a corpus chunk by chunk, word by word for BPE: the ids equal SentencePiece's own
encoding of each whole sentence (the reference), on real Multi30k and WMT news text."""

from __future__ import annotations

import numpy as np
import pytest

from transformer.data.corpus import ParallelText, iter_parallel, read_parallel
from transformer.data.encoding import (
    collect_words,
    encode_chunks,
    encode_collected,
    encode_corpus,
    token_dtype,
)
from transformer.data.token_cache import ArrayWriter, load_arrays
from transformer.data.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def multi30k(shared_data):
    return read_parallel(str(shared_data / "multi30k" / "train"), "en", "de")


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def tokenizer(request, multi30k):
    return Tokenizer(Tokenizer.train(multi30k.src + multi30k.tgt, 2000, request.param))


def rows(arrays, side):
    tokens, offsets = arrays[f"{side}_tokens"], arrays[f"{side}_offsets"]
    return [tokens[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


@pytest.mark.parametrize("corpus", ["multi30k/val", "wmt14-en-de/newstest2014"])
def test_chunks_encode_as_sentencepiece_encodes_each_sentence(
    shared_data, tokenizer, tmp_path, corpus, request
):
    prefix = str(shared_data / corpus)
    text = read_parallel(prefix, "en", "de")
    text.src[3], text.tgt[5] = "", "  two  spaces\tand a tab\u00a0nbsp "  # blank and odd spaces
    writer = ArrayWriter(tmp_path / "e")
    seen = []
    chunks = [(text.src[i : i + 333], text.tgt[i : i + 333]) for i in range(0, len(text), 333)]
    assert encode_chunks(chunks, tokenizer, writer, seen.append) == len(text)
    writer.commit()
    arrays = load_arrays(tmp_path / "e")
    assert rows(arrays, "src") == tokenizer.encode_batch(text.src)
    assert rows(arrays, "tgt") == tokenizer.encode_target_batch(text.tgt)
    assert sum(seen) == len(text) and arrays["src_tokens"].dtype == token_dtype(tokenizer)
    in_memory = encode_corpus(text, tokenizer)
    assert [in_memory[i][0].tolist() for i in range(len(text))] == rows(arrays, "src")
    assert tokenizer.word_level == (request.node.callspec.params["tokenizer"] == "bpe")


def test_the_second_pass_of_collected_words_equals_one_pass(multi30k, tmp_path):
    tokenizer = Tokenizer(Tokenizer.train(multi30k.src[:3000] + multi30k.tgt[:3000], 1000))
    assert tokenizer.word_level
    src, tgt = multi30k.src[:3000], multi30k.tgt[:3000]
    chunks = [(src[i : i + 700], tgt[i : i + 700]) for i in range(0, 3000, 700)]
    scratch = ArrayWriter(tmp_path / "scratch")
    collected = collect_words(chunks, 1.0, 1, scratch, lambda n: None)
    scratch_path = scratch.commit()
    counted = {}
    for table, counts in zip(collected.tables, collected.counts, strict=True):
        for word, count in zip(table.words(), counts.tolist(), strict=True):
            counted[word] = counted.get(word, 0) + count
    reference = {}
    for sentence in src + tgt:
        for word in sentence.split(" "):
            reference[word] = reference.get(word, 0) + 1
    assert counted == reference  # every word of every sentence, counted once
    two, one = ArrayWriter(tmp_path / "two"), ArrayWriter(tmp_path / "one")
    encode_collected(collected, scratch_path, tokenizer, two, lambda n: None, chunk_pairs=999)
    encode_chunks(chunks, tokenizer, one, lambda n: None)
    two_arrays, one_arrays = load_arrays(two.commit()), load_arrays(one.commit())
    for name in one_arrays:
        np.testing.assert_array_equal(two_arrays[name], one_arrays[name])


def test_a_sample_counts_about_its_share_of_the_words(multi30k, tmp_path):
    chunks = [(multi30k.src, multi30k.tgt)]
    full = collect_words(chunks, 1.0, 1, ArrayWriter(tmp_path / "a"), lambda n: None)
    half = collect_words(chunks, 0.5, 1, ArrayWriter(tmp_path / "b"), lambda n: None)
    again = collect_words(chunks, 0.5, 1, ArrayWriter(tmp_path / "c"), lambda n: None)
    ratio = sum(c.sum() for c in half.counts) / sum(c.sum() for c in full.counts)
    assert 0.47 < ratio < 0.53
    for a, b in zip(half.counts, again.counts, strict=True):
        np.testing.assert_array_equal(a, b)  # the same seed draws the same sample


def test_iter_parallel_chunks_are_the_whole_corpus(shared_data):
    prefix = str(shared_data / "multi30k" / "val")
    whole = read_parallel(prefix, "en", "de")
    src, tgt = [], []
    for s, t in iter_parallel(prefix, "en", "de", chunk_pairs=100):
        assert len(s) == len(t) <= 100
        src += s
        tgt += t
    assert ParallelText(src, tgt, "", "").src == whole.src and tgt == whole.tgt
