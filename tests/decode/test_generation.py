"""Tests for transformer/decode/generation.py: one batch of `Translator.generate`.

References: the search functions called directly; the tokenizer's own encoding.
"""

from __future__ import annotations

import pytest

from transformer.decode.beam_search import beam_search
from transformer.decode.config import DecodeConfig
from transformer.decode.generation import align_batch, prefix_ids, search_batch
from transformer.decode.greedy import greedy_search
from transformer.decode.inputs import Request
from transformer.decode.sampling import sample_search


def test_the_request_names_the_search(make_search_model, random_batch):
    model = make_search_model()
    src = random_batch(0, 40, [5, 3, 4])
    greedy = search_batch([model], src, Request(DecodeConfig(max_len_b=5), greedy=True), 1)
    assert greedy == [[h] for h in greedy_search(model, src, max_len_b=5)]
    beam = search_batch([model], src, Request(DecodeConfig(beam_size=3, max_len_b=5)), 2)
    assert beam == beam_search(model, src, beam_size=3, nbest=2, max_len_b=5)
    sampling = DecodeConfig(sampling=True, num_samples=4, max_len_b=5)
    drawn = search_batch([model], src, Request(sampling), 3, seeds=[1, 2, 3])
    reference = sample_search(model, src, [1, 2, 3], num_samples=4, max_len_b=5)
    for found, samples in zip(drawn, reference, strict=True):
        assert found == sorted(samples, key=lambda h: h.score, reverse=True)[:3]
    assert align_batch([model], None, src, beam, [[]] * 3, None) == [[None, None]] * 3


def test_prefix_ids_encode_the_target_side_and_refuse_a_prefix_too_long(synthetic_tokenizer):
    prefix = ["", "a man", "the", "dog"]
    ids = prefix_ids(synthetic_tokenizer, prefix, [1, 3], max_positions=128)
    assert ids == [
        synthetic_tokenizer.encode_target("a man"),
        synthetic_tokenizer.encode_target("dog"),
    ]
    assert prefix_ids(synthetic_tokenizer, prefix, [0], 128) is None
    assert prefix_ids(synthetic_tokenizer, None, [0, 1], 128) is None
    n = len(synthetic_tokenizer.encode_target("a man"))
    with pytest.raises(
        ValueError, match=rf"^prefix\[1\] has {n} tokens; the model decodes at most {n}"
    ):
        prefix_ids(synthetic_tokenizer, prefix, [1], max_positions=n)
