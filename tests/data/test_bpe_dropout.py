"""Tests for transformer/data/bpe_dropout.py: a BPE-dropout segmentation of the corpus per epoch.

References: SentencePiece's own processor (the deterministic segmentation of each word, and
what every sampled one decodes to), the corpus's words read here with `str.split(" ")` in
first-seen order, and a brute-force check that a sampled sentence is its words' samples, one
after the other.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sentencepiece as spm

from transformer.data.bpe_dropout import SAMPLES_PER_WORD, BPEDropoutDataset
from transformer.data.config import DataConfig
from transformer.data.corpus import read_lines
from transformer.data.dataset import ParallelDataset
from transformer.data.prepare import prepare_data

N_LINES = 400
LANGS = ("en", "de")


@pytest.fixture(scope="module")
def prepared(shared_data, tmp_path_factory):
    """400 Multi30k pairs prepared with BPE-dropout 0.1 (a 500-piece joint BPE model)."""
    directory = tmp_path_factory.mktemp("bpe_dropout")
    prefix = shared_data / "multi30k" / "train"
    for lang in LANGS:
        lines = read_lines(prefix.with_suffix(f".{lang}"))[:N_LINES]
        (directory / f"train.{lang}").write_text("".join(f"{x}\n" for x in lines), "utf-8")
    config = DataConfig(
        train=str(directory / "train"), valid=None, test=None, vocab_size=500, max_len=64,
        bpe_dropout=0.1,
    )  # fmt: skip
    return config, prepare_data(config, directory / "run", log=None), directory / "run"


def _ids(data, side: int) -> list[list[int]]:
    return [data[i][side].tolist() for i in range(len(data))]


def _words(config, side: int) -> tuple[list[list[str]], dict[str, int]]:
    """Each sentence's words, and every distinct word's id in first-seen order."""
    sentences = [line.split(" ") for line in read_lines(f"{config.train}.{LANGS[side]}")]
    ids: dict[str, int] = {}
    for words in sentences:
        for word in words:
            ids.setdefault(word, len(ids))
    return sentences, ids


def _variants(segmentations, side: int, word_id: int) -> list[list[int]]:
    """Segmentation v of a word: v = 0 deterministic, 1..S samples."""
    name, width = ("src", "tgt")[side], SAMPLES_PER_WORD + 1
    pieces, offsets = segmentations[f"{name}_pieces"], segmentations[f"{name}_offsets"]
    first = word_id * width
    return [pieces[offsets[first + v] : offsets[first + v + 1]].tolist() for v in range(width)]


def test_prepare_data_gives_a_bpe_dropout_dataset_that_is_the_deterministic_one(prepared, tmp_path):
    config, data, _ = prepared
    train = data.train
    assert isinstance(train, BPEDropoutDataset)
    sp = spm.SentencePieceProcessor(model_proto=data.tokenizer.src_model_bytes)
    sources = read_lines(f"{config.train}.en")
    assert _ids(train, 0) == [sp.encode(sources[row]) for row in train.line_numbers.tolist()]
    plain = prepare_data(dataclasses.replace(config, bpe_dropout=0.0), tmp_path, log=None)
    assert type(plain.train) is ParallelDataset  # off: the paper's one segmentation


def test_every_word_has_its_deterministic_segmentation_and_samples_that_spell_it(prepared):
    config, data, _ = prepared
    sp = spm.SentencePieceProcessor(model_proto=data.tokenizer.src_model_bytes)
    segmentations = data.train.segmentations
    for side in (0, 1):
        _, ids = _words(config, side)
        longer = distinct = 0
        for word, word_id in ids.items():
            variants = _variants(segmentations, side, word_id)
            assert variants[0] == sp.encode(word), word
            assert {sp.decode(v) for v in variants} == {sp.decode(sp.encode(word))}, word
            longer += sum(len(v) > len(variants[0]) for v in variants[1:])
            distinct += len({tuple(v) for v in variants[1:]}) > 1
        # BPE-dropout splits finer: at p = 0.1 a good share of the samples have more pieces,
        # and many words have more than one sample.
        assert longer > 0.1 * SAMPLES_PER_WORD * len(ids)
        assert distinct > 0.2 * len(ids)


def _is_made_of(ids: list[int], variants_of_words: list[list[list[int]]]) -> bool:
    """Whether `ids` is one variant of each word, in order (brute force over positions)."""
    reachable = {0}
    for variants in variants_of_words:
        reachable = {
            at + len(v) for at in reachable for v in variants if ids[at : at + len(v)] == v
        }
    return len(ids) in reachable


def test_an_epoch_gives_each_word_of_each_sentence_one_of_its_samples(prepared):
    config, data, _ = prepared
    train = data.train
    sampled = train.for_epoch(3, 7)
    assert sampled.line_numbers.tolist() == train.line_numbers.tolist()
    segmentations = train.segmentations
    for side in (0, 1):
        sentences, ids = _words(config, side)
        for i, row in enumerate(train.line_numbers.tolist()):
            words = [_variants(segmentations, side, ids[w]) for w in sentences[row]]
            got = sampled[i][side].tolist()
            if len(got) <= config.max_len:
                assert _is_made_of(got, [v[1:] for v in words]), row
        lengths = (sampled.src_lengths, sampled.tgt_lengths)[side]
        assert lengths.sum() > 1.1 * (train.src_lengths, train.tgt_lengths)[side].sum()


def test_the_same_epoch_and_seed_give_the_same_pairs_and_others_differ(prepared):
    """Another process of the job, or the resumed run, opens the same cache entry and draws
    the same epoch; another epoch or seed draws other samples."""
    config, data, run_dir = prepared
    opened = prepare_data(config, run_dir, log=None, build=False).train  # from the cache
    first = _ids(data.train.for_epoch(2, 1), 1)
    assert _ids(opened.for_epoch(2, 1), 1) == first
    assert _ids(data.train.for_epoch(3, 1), 1) != first
    assert _ids(data.train.for_epoch(2, 2), 1) != first
    assert _ids(data.train.for_epoch(2, 1), 1) == first  # after others: the same again


@pytest.mark.parametrize("rule", ["max_len", "max_len_ratio"])
def test_a_pair_sampled_against_the_filters_rules_keeps_its_deterministic_ids(prepared, rule):
    """A pair whose sampled sides break a rule of the filter (a side longer than max_len, or
    a length ratio above max_len_ratio) keeps its deterministic ids on both sides; the others
    are sampled as without the rule."""
    _, data, _ = prepared
    train = data.train
    free = BPEDropoutDataset(train, train.segmentations, 10**6).for_epoch(1, 1)
    # The limit: just below the largest value a pair whose sample differs from its
    # deterministic ids takes, so that such a pair breaks it whatever SentencePiece drew (its
    # sampling cannot be seeded) and keeping the deterministic ids is seen.
    lengths = np.array([[len(ids) for ids in free[i]] for i in range(len(train))])
    longest, shortest = lengths.max(axis=1), np.maximum(lengths.min(axis=1), 1)
    key = longest if rule == "max_len" else longest / shortest
    differs = np.array([_as_lists(free[i]) != _as_lists(train[i]) for i in range(len(train))])
    limit = key[key < key[differs].max()].max()
    max_len = int(limit) if rule == "max_len" else 10**6
    limits = dict(max_len=max_len)
    if rule == "max_len_ratio":
        limits["max_len_ratio"] = float(limit)
    bounded = BPEDropoutDataset(train, train.segmentations, **limits).for_epoch(1, 1)
    broken = 0
    for i in range(len(train)):
        s, t = (len(ids) for ids in free[i])
        breaks = max(s, t) > max_len if rule == "max_len" else max(s, t) / max(min(s, t), 1) > limit
        broken += breaks
        expected = train[i] if breaks else free[i]
        assert [ids.tolist() for ids in bounded[i]] == [ids.tolist() for ids in expected], i
    assert 0 < broken < len(train) / 2  # the rule was used, and most pairs are sampled


def _as_lists(pair) -> list[list[int]]:
    return [ids.tolist() for ids in pair]


def test_each_side_is_sampled_with_its_own_model(prepared, tmp_path):
    """Separate vocabularies (data.shared_vocab false): the target side's segmentations are
    the target model's."""
    config, _, _ = prepared
    config = dataclasses.replace(config, shared_vocab=False, vocab_size=300)
    data = prepare_data(config, tmp_path, log=None)
    tgt = spm.SentencePieceProcessor(model_proto=data.tokenizer.tgt_model_bytes)
    targets = read_lines(f"{config.train}.de")
    sampled = data.train.for_epoch(1, 1)
    rows = data.train.line_numbers.tolist()
    assert [tgt.decode(ids) for ids in _ids(sampled, 1)] == [
        tgt.decode(tgt.encode(targets[row])) for row in rows
    ]
    assert _ids(sampled, 1) != _ids(data.train, 1)
    _, ids = _words(config, 1)
    assert all(
        _variants(data.train.segmentations, 1, i)[0] == tgt.encode(w) for w, i in ids.items()
    )
