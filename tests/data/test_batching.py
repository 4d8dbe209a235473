"""BatchIterator invariants: token budget with padding, coverage, sharding, exact resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from transformer.data.batching import BatchIterator, length_sorted_batches
from transformer.data.dataset import ParallelDataset

PAD, BOS, EOS = 0, 2, 3


def make_dataset(n: int = 1000, seed: int = 0, max_len: int = 60) -> ParallelDataset:
    """Random lengths; token values in [4, 100) so none collides with the special ids."""
    rng = np.random.default_rng(seed)
    src_len = rng.integers(1, max_len, n)
    tgt_len = np.clip(src_len + rng.integers(-5, 6, n), 1, None)

    def flat(lengths):
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return rng.integers(4, 100, int(offsets[-1])).astype(np.uint16), offsets

    src_tokens, src_offsets = flat(src_len)
    tgt_tokens, tgt_offsets = flat(tgt_len)
    return ParallelDataset(src_tokens, src_offsets, tgt_tokens, tgt_offsets, np.arange(n))


def all_batches(iterator, epoch=1):
    return list(iterator.epoch(epoch))


@pytest.mark.parametrize("max_tokens", [64, 500, 4096])
def test_budget_including_padding_and_each_pair_once(max_tokens):
    data = make_dataset()
    batches = all_batches(BatchIterator(data, max_tokens, seed=3))
    for batch in batches:
        assert batch.src.numel() <= max_tokens
        assert batch.tgt_in.numel() <= max_tokens and batch.tgt_out.numel() <= max_tokens
    seen = np.concatenate([b.indices for b in batches])
    np.testing.assert_array_equal(np.sort(seen), np.arange(len(data)))


def test_batch_contents_follow_the_dataset():
    data = make_dataset(200)
    for batch in all_batches(BatchIterator(data, 300, seed=1)):
        assert batch.src.dtype == torch.long and batch.tgt_in.shape == batch.tgt_out.shape
        for row, index in enumerate(batch.indices):
            src, tgt = (torch.from_numpy(x.astype(np.int64)) for x in data[int(index)])
            S, T = len(src), len(tgt)
            assert torch.equal(batch.src[row, :S], src) and (batch.src[row, S:] == PAD).all()
            assert batch.tgt_in[row, 0] == BOS and torch.equal(batch.tgt_in[row, 1 : T + 1], tgt)
            assert torch.equal(batch.tgt_out[row, :T], tgt) and batch.tgt_out[row, T] == EOS
            assert (batch.tgt_in[row, T + 1 :] == PAD).all()
            assert (batch.tgt_out[row, T + 1 :] == PAD).all()
        assert batch.n_src_tokens == int((batch.src != PAD).sum())
        assert batch.n_tgt_tokens == int((batch.tgt_out != PAD).sum())
        assert batch.n_tgt_tokens == int((batch.tgt_in != PAD).sum())


def test_order_depends_only_on_seed_and_epoch():
    data = make_dataset()

    def order(seed, epoch):
        return [b.indices.tolist() for b in BatchIterator(data, 500, seed=seed).epoch(epoch)]

    assert order(1, 1) == order(1, 1)
    assert order(1, 1) != order(1, 2) and order(1, 1) != order(2, 1)
    assert len(order(1, 1)) == len(order(1, 2))  # same length profile -> same batch count


def test_no_shuffle_keeps_length_order():
    data = make_dataset(300)
    batches = all_batches(BatchIterator(data, 400, shuffle=False))
    longest = [max(b.src.shape[1], b.tgt_out.shape[1]) for b in batches]
    assert longest == sorted(longest)
    assert [b.indices.tolist() for b in batches] == [
        b.indices.tolist() for b in BatchIterator(data, 400, shuffle=False).epoch(7)
    ]


def test_grouping_by_length_keeps_padding_low():
    data = make_dataset(5000)
    batches = all_batches(BatchIterator(data, 4096, seed=1))
    real = sum(b.n_src_tokens + b.n_tgt_tokens for b in batches)
    padded = sum(b.src.numel() + b.tgt_out.numel() for b in batches)
    assert 1 - real / padded < 0.10


@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_are_disjoint_equal_and_interleaved(world_size):
    data = make_dataset(777)
    single = [b.indices.tolist() for b in BatchIterator(data, 300, seed=5).epoch(2)]
    shards = [
        [
            b.indices.tolist()
            for b in BatchIterator(data, 300, seed=5, rank=r, world_size=world_size).epoch(2)
        ]
        for r in range(world_size)
    ]
    usable = len(single) // world_size * world_size
    assert {len(shard) for shard in shards} == {usable // world_size}
    for r, shard in enumerate(shards):
        assert shard == single[r:usable:world_size]  # contract: rank r takes r, r + w, ...
    flat = [i for shard in shards for batch in shard for i in batch]
    assert len(flat) == len(set(flat))


def test_restoring_a_position_yields_the_same_next_batch():
    data = make_dataset(500)
    reference = BatchIterator(data, 300, seed=9)
    stream = iter(reference)
    for _ in range(5):
        next(stream)
    state = reference.state_dict()
    assert state == {"epoch": 1, "index": 5}
    expected = [next(stream) for _ in range(3)]
    resumed = BatchIterator(data, 300, seed=9)
    resumed.load_state_dict(state)
    stream = iter(resumed)
    for want in expected:
        batch = next(stream)
        assert torch.equal(batch.src, want.src) and torch.equal(batch.tgt_out, want.tgt_out)


class Resegmented(ParallelDataset):
    """A dataset whose pairs of epoch e are those of `make_dataset(seed=e)`: other lengths and
    ids each epoch, as BPE-dropout gives (data/bpe_dropout.py)."""

    def for_epoch(self, epoch: int, seed: int) -> ParallelDataset:
        return make_dataset(300, seed=100 * seed + epoch)


def test_each_epochs_batches_are_cut_from_and_filled_with_that_epochs_pairs():
    base = make_dataset(300)
    data = Resegmented(
        base.src_tokens, base.src_offsets, base.tgt_tokens, base.tgt_offsets, base.line_numbers
    )
    iterator = BatchIterator(data, 200, seed=4)
    for epoch in (1, 2, 3):
        pairs = data.for_epoch(epoch, 4)
        batches = all_batches(iterator, epoch)
        assert [b.indices.tolist() for b in batches] == [
            b.indices.tolist() for b in all_batches(BatchIterator(pairs, 200, seed=4), epoch)
        ]
        for batch in batches:
            for row, index in enumerate(batch.indices):
                src = torch.from_numpy(pairs[int(index)][0].astype(np.int64))
                assert torch.equal(batch.src[row, : len(src)], src)
    # Resumed in the middle of epoch 2: the same next batch as the uninterrupted iterator.
    resumed = BatchIterator(data, 200, seed=4)
    resumed.load_state_dict({"epoch": 2, "index": 3})
    expected = all_batches(iterator, 2)[3]
    got = next(iter(resumed))
    assert torch.equal(got.src, expected.src) and torch.equal(got.tgt_out, expected.tgt_out)


def test_position_rolls_over_at_epoch_end():
    data = make_dataset(300)
    iterator = BatchIterator(data, 400, seed=1)
    n = len(iterator)
    epoch_one = all_batches(iterator, 1)
    assert len(epoch_one) == n and iterator.state_dict() == {"epoch": 2, "index": 0}
    # Saved right after the last batch was handed out (before the generator finished).
    other = BatchIterator(data, 400, seed=1)
    stream = iter(other)
    for _ in range(n):
        next(stream)
    assert other.state_dict() == {"epoch": 2, "index": 0}
    first_of_two = next(stream)
    assert torch.equal(first_of_two.src, next(iter(BatchIterator(data, 400, seed=1).epoch(2))).src)


def test_bad_arguments_raise():
    data = make_dataset(50, max_len=40)
    with pytest.raises(ValueError, match="max_tokens"):
        BatchIterator(data, 20)
    with pytest.raises(ValueError, match="rank"):
        BatchIterator(data, 400, rank=2, world_size=2)
    with pytest.raises(ValueError, match="world_size"):
        BatchIterator(data, 10_000, world_size=8)
    iterator = BatchIterator(data, 400)
    with pytest.raises(ValueError, match="outside epoch"):
        iterator.load_state_dict({"epoch": 1, "index": 10_000})


def test_length_sorted_batches_cover_every_index_within_budget():
    lengths = [5, 1, 9, 3, 3, 12, 7, 2, 20]
    batches = length_sorted_batches(lengths, max_tokens=12)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) * longest <= 12 or len(batch) == 1
        assert lengths[batch[0]] == longest
    assert [lengths[b[0]] for b in batches] == sorted(
        (lengths[b[0]] for b in batches), reverse=True
    )


@pytest.mark.parametrize("max_tokens", [64, 500])
def test_padding_to_a_multiple_keeps_the_budget_and_the_contents(max_tokens):
    data = make_dataset(300)
    plain = {tuple(b.indices) for b in BatchIterator(data, max_tokens, seed=2).epoch(1)}
    padded = all_batches(BatchIterator(data, max_tokens, seed=2, pad_to_multiple=8))
    for batch in padded:
        (B, S), T_padded = batch.src.shape, batch.tgt_in.shape[1]
        assert S % 8 == 0 and T_padded % 8 == 0 and B * max(S, T_padded) <= max_tokens
        longest = max(len(data[int(i)][0]) for i in batch.indices)
        assert S - 8 < longest <= S  # no more than the multiple needs
        assert batch.n_src_tokens == int(batch.src.ne(PAD).sum())
        assert batch.n_tgt_tokens == int(batch.tgt_out.ne(PAD).sum())
        for row, index in enumerate(batch.indices):
            src, tgt = (torch.from_numpy(x.astype(np.int64)) for x in data[int(index)])
            assert torch.equal(batch.src[row, : len(src)], src)
            assert (batch.src[row, len(src) :] == PAD).all()
            T = len(tgt)
            assert torch.equal(batch.tgt_out[row, :T], tgt) and batch.tgt_out[row, T] == EOS
            assert (batch.tgt_out[row, T + 1 :] == PAD).all()
    seen = np.sort(np.concatenate([b.indices for b in padded]))
    np.testing.assert_array_equal(seen, np.arange(len(data)))
    # The padded length counts against the budget, so batches can only get smaller.
    assert len(padded) >= len(plain)


def test_padding_to_a_multiple_is_checked():
    data = make_dataset(50, max_len=40)  # the longest target + eos: up to 45 tokens
    with pytest.raises(ValueError, match="pad_to_multiple"):
        BatchIterator(data, 400, pad_to_multiple=0)
    with pytest.raises(ValueError, match="padded to a multiple of 64"):
        BatchIterator(data, 50, pad_to_multiple=64)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_pinned_batch_holds_the_same_tensors():
    batch = next(iter(BatchIterator(make_dataset(50), 400)))
    pinned = batch.pin_memory()
    for name in ("src", "tgt_in", "tgt_out"):
        assert getattr(pinned, name).is_pinned()
        assert torch.equal(getattr(pinned, name), getattr(batch, name))
    assert pinned.n_tgt_tokens == batch.n_tgt_tokens
