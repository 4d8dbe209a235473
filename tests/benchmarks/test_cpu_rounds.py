"""benchmarks/cpu_rounds.py: the cache check that fails the benchmark when our cache is wrong."""

from __future__ import annotations

import pytest

from benchmarks.cpu_rounds import CacheMismatchError, check_cache_equality
from benchmarks.engines import EOS_ID, Dims, Engine, random_sources
from transformer.model.cache import LayerCache

TINY = Dims(vocab_size=64, d_model=32, d_ff=64, n_heads=4, n_layers=2, max_positions=256)


def test_cache_check_compares_token_for_token():
    assert check_cache_equality([[5, 6], [7, 8]], [[5, 6], [7, 8]])["equal"]
    with pytest.raises(CacheMismatchError, match="sentence 1, position 1"):
        check_cache_equality([[5, 6], [7, 8]], [[5, 6], [7, 9]])


def test_cached_greedy_equals_no_cache_greedy():
    engine = Engine("ours", TINY, seed=0)
    src = random_sources(3, 7, TINY.vocab_size, seed=1)
    cached = engine.decode(src, 12)["tokens"]
    assert all(len(row) == 12 and EOS_ID not in row for row in cached)
    check_cache_equality(cached, engine.decode(src, 12, cache=False)["tokens"])


def test_wrong_cache_fails_the_check(monkeypatch):
    engine = Engine("ours", TINY, seed=0)
    src = random_sources(3, 7, TINY.vocab_size, seed=1)
    uncached = engine.decode(src, 12, cache=False)["tokens"]

    def forgetful_append(self, k, v):  # a fast but wrong cache: drops earlier positions
        self.self_k, self.self_v = k, v
        return k, v

    monkeypatch.setattr(LayerCache, "append_self", forgetful_append)
    cached = engine.decode(src, 12)["tokens"]
    with pytest.raises(CacheMismatchError):
        check_cache_equality(cached, uncached)
