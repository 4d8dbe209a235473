"""Token-based batching grouped by length (section 5.1 of the paper), sharded and resumable;
and `length_sorted_batches`, the same idea for the sentences a translation call decodes.

"Sentence pairs were batched together by approximate sequence length. Each training batch
contained a set of sentence pairs containing approximately 25000 source tokens and 25000
target tokens." Here a batch holds at most `max_tokens` tokens on EACH side, padding included:
B * S <= max_tokens and B * T <= max_tokens, where S is the longest source and T the longest
target + 1 (the bos of `tgt_in` / eos of `tgt_out`).

Each epoch: the pairs are shuffled with a generator seeded by (seed, epoch), stably sorted by
length (so equal-length pairs mix differently every epoch while the batch boundaries stay the
same), cut greedily into batches, and the batch order is shuffled with the same generator.
Sharding: the epoch's batch list is trimmed to a multiple of `world_size` and rank r takes
batches r, r + w, r + 2w, ...; so one process with update_freq 2 over batches (0, 1) sees what
two ranks see (rank 0: batch 0, rank 1: batch 1), and every rank has the same count.

With `pad_to_multiple`, S and T are padded up to a multiple of it (few distinct shapes, for
code that needs them fixed), and that padded length is what counts against `max_tokens`. The
extra positions are padding like any other: masked in attention and ignored by the loss. The
trainer keeps the default of 1: on Multi30k a multiple of 8 lowers the share of real tokens
from 96% to 78%, and torch.compile needs no fixed shapes (see train/update.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from transformer.data.dataset import ParallelDataset
from transformer.data.heap import release_free_memory


@dataclass
class Batch:
    """One padded batch.

    Attributes:
        src: (B, S) long source ids (no bos/eos), padded with pad_id.
        tgt_in: (B, T) long, bos + target: the decoder input (teacher forcing).
        tgt_out: (B, T) long, target + eos: what the decoder must predict.
        n_src_tokens: Non-pad tokens in `src`.
        n_tgt_tokens: Non-pad tokens in `tgt_out` (target tokens + one eos per pair).
        indices: (B,) positions of the pairs in the dataset.
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    n_src_tokens: int
    n_tgt_tokens: int
    indices: np.ndarray

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """The same batch with its tensors on `device`."""
        return Batch(
            self.src.to(device, non_blocking=non_blocking),
            self.tgt_in.to(device, non_blocking=non_blocking),
            self.tgt_out.to(device, non_blocking=non_blocking),
            self.n_src_tokens,
            self.n_tgt_tokens,
            self.indices,
        )

    def pin_memory(self) -> Batch:
        """The same batch with its tensors in page-locked host memory, so that a copy to a GPU
        with `to(device, non_blocking=True)` runs asynchronously (needs CUDA)."""
        return Batch(
            self.src.pin_memory(),
            self.tgt_in.pin_memory(),
            self.tgt_out.pin_memory(),
            self.n_src_tokens,
            self.n_tgt_tokens,
            self.indices,
        )


class BatchIterator:
    """Deterministic, shardable, resumable token-based batches over a `ParallelDataset`.

    Args:
        dataset: Encoded pairs.
        max_tokens: Upper bound on B * S and on B * T of every batch (padding included).
        pad_id, bos_id, eos_id: Special ids (the tokenizer's).
        seed: With the epoch number, fixes the shuffle.
        rank, world_size: This process's shard (see module doc).
        shuffle: False keeps length order and no shuffling (validation).
        pad_to_multiple: Pad S and T up to a multiple of this (1: to the longest sentence).

    Raises:
        ValueError: for a bad rank/world_size or pad_to_multiple, a pair that cannot fit in
            `max_tokens` (naming its padded length; lower data.max_len or raise max_tokens),
            or fewer batches than ranks.

    Example:
        >>> it = BatchIterator(prepared.train, max_tokens=4096, seed=1)
        >>> for batch in it.epoch(1):
        ...     logits = model(batch.src, batch.tgt_in)  # (B, T, V), loss against batch.tgt_out
        >>> state = it.state_dict()  # {"epoch": 2, "index": 0}
    """

    def __init__(
        self,
        dataset: ParallelDataset,
        max_tokens: int,
        pad_id: int = 0,
        bos_id: int = 2,
        eos_id: int = 3,
        seed: int = 1,
        rank: int = 0,
        world_size: int = 1,
        shuffle: bool = True,
        pad_to_multiple: int = 1,
    ) -> None:
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank ({rank}) must be in [0, world_size={world_size})")
        if pad_to_multiple < 1:
            raise ValueError(f"pad_to_multiple ({pad_to_multiple}) must be at least 1")
        if len(dataset) == 0:
            raise ValueError("cannot batch an empty dataset")
        self.dataset = dataset
        self.max_tokens = max_tokens
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.seed, self.rank, self.world_size, self.shuffle = seed, rank, world_size, shuffle
        self.pad_to_multiple = pad_to_multiple
        # The dataset's own arrays (shared memory maps for a cached corpus), not copies:
        # the target side counts one more token, bos (tgt_in) or eos (tgt_out).
        self._data = dataset
        self._src_len, self._tgt_len = dataset.src_lengths, dataset.tgt_lengths
        longest = self._padded(int(max(self._src_len.max(), self._tgt_len.max() + 1)))
        if longest > max_tokens:
            padded = f", padded to a multiple of {pad_to_multiple}" if pad_to_multiple > 1 else ""
            raise ValueError(
                f"a pair has a side of {longest} tokens (target + eos{padded}), more than "
                f"max_tokens ({max_tokens}); raise max_tokens or lower data.max_len"
            )
        self._epoch, self._index = 1, 0
        self._cached_epoch: int | None = None
        self._cached_batches: list[np.ndarray] = []
        if len(self._batches(1)) == 0:
            raise ValueError(
                f"{len(dataset)} pairs give fewer batches than world_size ({world_size}); "
                "lower max_tokens or use fewer ranks"
            )

    def _batches(self, epoch: int) -> list[np.ndarray]:
        """This rank's batches of `epoch`, each an array of dataset indices."""
        if self._cached_epoch == epoch:
            return self._cached_batches
        # The epoch's pairs: the dataset itself, or its segmentation of this epoch (BPE-dropout,
        # data/bpe_dropout.py); `collate` reads the epoch whose batches were cut last.
        self._data = self.dataset.for_epoch(epoch, self.seed)
        self._src_len, self._tgt_len = self._data.src_lengths, self._data.tgt_lengths
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(len(self.dataset)) if self.shuffle else np.arange(len(self.dataset))
        src_len = self._src_len[order].astype(np.int64)
        tgt_len = self._tgt_len[order].astype(np.int64) + 1  # + bos or eos
        # Group by length: primary key the longer side, then source, then target (stable).
        by_length = np.lexsort((tgt_len, src_len, np.maximum(src_len, tgt_len)))
        order, src_len, tgt_len = order[by_length], src_len[by_length], tgt_len[by_length]
        batches = _cut(order, src_len.tolist(), tgt_len.tolist(), self.max_tokens, self._padded)
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        usable = len(batches) // self.world_size * self.world_size
        mine = batches[self.rank : usable : self.world_size]
        # Keep this rank's indices only, not views into the whole epoch's order.
        flat = np.concatenate(mine) if mine else np.zeros(0, dtype=np.int64)
        bounds = np.cumsum([0] + [len(batch) for batch in mine]).tolist()
        self._cached_epoch = epoch
        self._cached_batches = [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        del order, src_len, tgt_len, by_length, batches, mine
        release_free_memory()  # the plan's temporaries, a few hundred MB at WMT14 size
        return self._cached_batches

    def __len__(self) -> int:
        """Batches of the current epoch for this rank (the same on every rank; the same every
        epoch unless the dataset is segmented anew each epoch)."""
        return len(self._batches(self._epoch))

    def _padded(self, length: int) -> int:
        """`length` rounded up to a multiple of `pad_to_multiple`."""
        return -(-length // self.pad_to_multiple) * self.pad_to_multiple

    def collate(self, indices: np.ndarray) -> Batch:
        """Pad the pairs at `indices` into a `Batch`."""
        src_len = self._src_len[indices].astype(np.int64)
        tgt_len = self._tgt_len[indices].astype(np.int64) + 1  # + bos or eos
        S, T = self._padded(int(src_len.max())), self._padded(int(tgt_len.max()))
        src = np.full((len(indices), S), self.pad_id, dtype=np.int64)
        tgt_in = np.full((len(indices), T), self.pad_id, dtype=np.int64)
        tgt_out = tgt_in.copy()
        for row, index in enumerate(indices):
            source, target = self._data[int(index)]
            src[row, : len(source)] = source
            tgt_in[row, 0] = self.bos_id
            tgt_in[row, 1 : len(target) + 1] = target
            tgt_out[row, : len(target)] = target
            tgt_out[row, len(target)] = self.eos_id
        return Batch(
            torch.from_numpy(src),
            torch.from_numpy(tgt_in),
            torch.from_numpy(tgt_out),
            int(src_len.sum()),
            int(tgt_len.sum()),
            indices,
        )

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """Yield this rank's batches of `epoch`, starting at the saved index when the saved
        position is in this epoch (after `load_state_dict`), else at the first batch."""
        batches = self._batches(epoch)
        start = self._index if epoch == self._epoch else 0
        for index in range(start, len(batches)):
            self._epoch, self._index = epoch, index + 1
            yield self.collate(batches[index])
        self._epoch, self._index = epoch + 1, 0

    def __iter__(self) -> Iterator[Batch]:
        """Endless batches, epoch after epoch, from the current position."""
        while True:
            yield from self.epoch(self._epoch)

    def state_dict(self) -> dict:
        """Position of the next batch: {"epoch": int, "index": int}, and "segmentation" (the
        identity of BPE-dropout's samples) for a dataset segmented anew each epoch."""
        position = {"epoch": self._epoch, "index": self._index}
        if self._index >= len(self._batches(self._epoch)):
            position = {"epoch": self._epoch + 1, "index": 0}
        if self.dataset.segmentation is not None:
            position["segmentation"] = self.dataset.segmentation
        return position

    def load_state_dict(self, state: dict) -> None:
        """Continue at the position saved by `state_dict`.

        Raises:
            ValueError: when the index is outside the epoch (a different dataset, max_tokens
                or world_size than when it was saved).
        """
        epoch, index = int(state["epoch"]), int(state["index"])
        if not 0 <= index <= len(self._batches(epoch)):
            raise ValueError(
                f"data position {state} is outside epoch {epoch}, which has "
                f"{len(self._batches(epoch))} batches on this rank"
            )
        self._epoch, self._index = epoch, index


def _cut(order: np.ndarray, src_len: list[int], tgt_len: list[int], max_tokens: int, padded):
    """Greedily cut length-sorted pairs into batches with B * padded(max_len) <= max_tokens per
    side (`padded` rounds a length up as `collate` pads it)."""
    batches, start, longest_src, longest_tgt = [], 0, 0, 0
    for i, (s, t) in enumerate(zip(src_len, tgt_len, strict=True)):
        longest_src, longest_tgt = max(longest_src, s), max(longest_tgt, t)
        if (i - start + 1) * padded(max(longest_src, longest_tgt)) > max_tokens:
            batches.append(order[start:i])
            start, longest_src, longest_tgt = i, s, t
    batches.append(order[start:])
    return batches


def length_sorted_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Group sentence indices into batches of at most `max_tokens` padded source tokens.

    Sentences are sorted by length, longest first (ties keep input order), and a batch of b
    sentences whose longest has L tokens costs b * L. A sentence longer than `max_tokens` gets
    a batch of its own.

    Args:
        lengths: Token count of each sentence.
        max_tokens: Budget per batch (at least 1, as `DecodeConfig` checks).

    Returns:
        Lists of indices into `lengths`; every index appears exactly once.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for index in order:
        # sorted longest first, so the first sentence of a batch is its longest
        if batches and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= max_tokens:
            batches[-1].append(index)
        else:
            batches.append([index])
    return batches
