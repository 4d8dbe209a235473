"""Tests for transformer/export/huggingface_tokenizer.py: the `tokenizer.json` cuts text into the
same ids as SentencePiece itself (the reference), on real Multi30k and WMT text."""

from __future__ import annotations

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("google.protobuf")

from transformer.data.tokenizer import Tokenizer  # noqa: E402
from transformer.export.huggingface_tokenizer import (  # noqa: E402
    CONTROL,
    NORMAL,
    UNKNOWN,
    bpe_merges,
    fast_tokenizer,
)


@pytest.fixture(scope="module")
def multi30k_bpe(shared_data):
    """A 2000-piece joint BPE model of 4000 Multi30k training pairs (about a second)."""
    lines = []
    for lang in ("en", "de"):
        path = shared_data / "multi30k" / f"train.{lang}"
        lines += path.read_text(encoding="utf-8").splitlines()[:4000]
    return Tokenizer(Tokenizer.train(lines, 2000))


def real_text(shared_data) -> list[str]:
    texts = []
    for name in ("multi30k/test_2016_flickr.en", "multi30k/test_2016_flickr.de"):
        texts += (shared_data / name).read_text(encoding="utf-8").splitlines()
    for name in ("wmt14-en-de/newstest2014.en", "wmt14-en-de/newstest2014.de"):
        texts += (shared_data / name).read_text(encoding="utf-8").splitlines()[:500]
    return texts


EDGE_CASES = ["", "   ", "  two   spaces  ", "tab\tinside", "ﬁne ① Ｆｕｌｌ", "日本語 ☃", "a.b,c!"]


def test_ids_are_sentencepieces_on_real_and_awkward_text(multi30k_bpe, shared_data):
    fast = fast_tokenizer(multi30k_bpe.src_model_bytes)
    texts = real_text(shared_data) + EDGE_CASES
    ours = multi30k_bpe.encode_batch(texts)
    theirs = [e.ids for e in fast.encode_batch(texts, add_special_tokens=False)]
    mismatches = [text for text, a, b in zip(texts, ours, theirs, strict=True) if a != b]
    assert not mismatches, mismatches[:3]


def test_decoding_is_sentencepieces_without_unknown_pieces(multi30k_bpe, shared_data):
    fast = fast_tokenizer(multi30k_bpe.src_model_bytes)
    batch = [ids for ids in multi30k_bpe.encode_batch(real_text(shared_data)) if 1 not in ids]
    assert len(batch) > 1500
    assert fast.decode_batch(batch, skip_special_tokens=True) == multi30k_bpe.decode_batch(batch)


def test_merges_rank_by_the_merged_pieces_score():
    pieces = [
        ("<unk>", 0.0, UNKNOWN),
        ("<s>", 0.0, CONTROL),
        ("a", 0.0, NORMAL),
        ("b", 0.0, NORMAL),
        ("c", 0.0, NORMAL),
        ("bc", -2.0, NORMAL),
        ("ab", -1.0, NORMAL),
        ("abc", -3.0, NORMAL),
    ]
    assert bpe_merges(pieces) == [("a", "b"), ("b", "c"), ("a", "bc"), ("ab", "c")]


def test_a_unigram_model_is_refused(synthetic_sentences):
    unigram = Tokenizer.train(synthetic_sentences(300), 40, model_type="unigram")
    with pytest.raises(ValueError, match="BPE"):
        fast_tokenizer(unigram)
