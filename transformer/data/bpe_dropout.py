"""BPE-dropout (Provilkov et al., 2020): the training corpus segmented anew every epoch.

While BPE segments a word, BPE-dropout skips each merge with probability p, so a sentence comes
in different (mostly finer) pieces from one epoch to the next and the model learns how words
are built from their pieces: a regulariser, largest on small corpora. The ids stay those of
the run's SentencePiece model; only the choice among its segmentations varies. Validation,
test and decoding keep the deterministic segmentation (the paper's setting; p = 0.1 there).

SentencePiece implements the sampling (`encode(enable_sampling=True, alpha=p)` on a BPE model),
but the same seed gives other samples in another process (measured with sentencepiece 0.2),
so drawing each epoch in every process would give every process of a job, and a resumed run,
another segmentation. Instead, `write_segmentations` draws `SAMPLES_PER_WORD` BPE-dropout
segmentations of every distinct word of the training corpus once, with SentencePiece, beside
the word ids of every sentence, into a cache entry (the data preparation, before training).
BPE never merges across words (`word_encoding`), so a sentence's segmentation is that of its
words; each epoch, `BPEDropoutDataset.for_epoch` picks one of the samples for every word of
every sentence with numpy's generator seeded by (train.seed, epoch): the same pairs in every
process and after a resume, drawn from the word's BPE-dropout samples. A pair whose sample
breaks the filter's rules (`data.max_len`, `data.max_len_ratio`) keeps its deterministic
segmentation in that epoch. Another draw (a new cache) has another digest
(`BPEDropoutDataset.segmentation`), which a resumed run compares (train/batch_changes.py).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable

import numpy as np
import sentencepiece as spm

from transformer.data.dataset import ParallelDataset
from transformer.data.token_cache import ArrayWriter
from transformer.data.tokenizer import usable_cores
from transformer.data.word_encoding import WordTable, concatenate_pieces

# Segmentations drawn per distinct word, besides its deterministic one; words per draw call.
SAMPLES_PER_WORD = 16
WORDS_PER_DRAW = 100_000
SIDES = ("src", "tgt")


def write_segmentations(
    chunks: Iterable[tuple[list[str], list[str]]],
    models: tuple[bytes, bytes],
    p: float,
    dtype: type,
    writer: ArrayWriter,
    progress: Callable[[int], None],
) -> None:
    """Write the word ids of every sentence and the segmentations of every word, per side.

    Args:
        chunks: The training corpus, (source sentences, target sentences) in row order.
        models: The source and target SentencePiece model bytes (the same when shared).
        p: BPE-dropout's probability of skipping a merge.
        dtype: Token dtype (the corpus's).
        writer: The entry: `<side>_words` (int32) and `<side>_counts` (words per sentence),
            `<side>_pieces` and `<side>_offsets`, where segmentation v of word w is
            `pieces[offsets[w * (S + 1) + v] : offsets[w * (S + 1) + v + 1]]`, v = 0 the
            deterministic one and 1..S BPE-dropout samples (S = `SAMPLES_PER_WORD`).
        progress: Called with the number of pairs of each chunk read.
    """
    tables = [WordTable(None, np.int32) for _ in SIDES]
    for chunk in chunks:
        for side, table, sentences in zip(SIDES, tables, chunk, strict=True):
            ids, counts = table.word_ids(sentences)
            writer.append(f"{side}_words", ids.astype(np.int32))  # < 2**31 words
            writer.append(f"{side}_counts", counts)
        progress(len(chunk[0]))
    for side, table, model in zip(SIDES, tables, models, strict=True):
        sp, words = spm.SentencePieceProcessor(model_proto=model), table.words()
        options = dict(out_type=int, num_threads=usable_cores())
        pieces_end = 0
        writer.append(f"{side}_offsets", np.zeros(1, dtype=np.int64))
        for first in range(0, len(words), WORDS_PER_DRAW):
            some = words[first : first + WORDS_PER_DRAW]
            draws = [sp.encode(some, **options)]  # v = 0: deterministic
            for sample in range(SAMPLES_PER_WORD):
                # A seed per draw: calls seeded alike in one process repeat their samples.
                spm.set_random_generator_seed(first + sample + 1)
                draws.append(
                    sp.encode(some, enable_sampling=True, alpha=p, nbest_size=-1, **options)
                )
            by_word = [draw[w] for w in range(len(some)) for draw in draws]  # word-major
            lengths = np.fromiter(map(len, by_word), dtype=np.int64, count=len(by_word))
            flat = itertools.chain.from_iterable(by_word)
            count = int(lengths.sum())
            writer.append(f"{side}_pieces", np.fromiter(flat, dtype=dtype, count=count))
            writer.append(f"{side}_offsets", pieces_end + np.cumsum(lengths))
            pieces_end += count


class BPEDropoutDataset(ParallelDataset):
    """Training pairs whose segmentation is drawn again every epoch (`for_epoch`).

    As a `ParallelDataset` it is the deterministic segmentation (what `prepare_data` cached);
    `BatchIterator` asks `for_epoch(e, seed)` for the pairs of epoch e. A pair whose sampled
    sides break the filter's rules (a side longer than `max_len`, a length ratio above
    `max_len_ratio`) keeps its deterministic segmentation in that epoch.

    Args:
        base: The filtered, deterministically encoded training pairs.
        segmentations: The arrays of `write_segmentations` (memory-mapped cache entry).
        max_len: The longest side kept (`data.max_len`).
        max_len_ratio: The largest length ratio kept (`data.max_len_ratio`), or None.

    Attributes:
        segmentation: A digest of the samples: another draw (a new cache entry) gives other
            epochs, which a resumed run must know (train/batch_changes.py).

    Shape:
        `for_epoch`: a `ParallelDataset` of the same N pairs, with its own flat token arrays.
    """

    def __init__(
        self,
        base: ParallelDataset,
        segmentations: dict[str, np.ndarray],
        max_len: int,
        max_len_ratio: float | None = None,
    ) -> None:
        super().__init__(
            base.src_tokens,
            base.src_offsets,
            base.tgt_tokens,
            base.tgt_offsets,
            base.line_numbers,
            base.src_lengths,
            base.tgt_lengths,
        )
        self.segmentations, self.max_len, self.max_len_ratio = segmentations, max_len, max_len_ratio
        digest = hashlib.blake2b(digest_size=8)
        for side in SIDES:
            digest.update(segmentations[f"{side}_pieces"].tobytes())
            digest.update(segmentations[f"{side}_offsets"].tobytes())
        self.segmentation = digest.hexdigest()
        self._key: tuple[int, int] | None = None
        self._data: ParallelDataset | None = None

    def for_epoch(self, epoch: int, seed: int) -> ParallelDataset:
        """The pairs of `epoch`: every word of every sentence takes one of its BPE-dropout
        samples at random ((seed, epoch) seeds the choice); the last epoch's pairs are kept."""
        if self._key != (seed, epoch):
            self._data, self._key = None, None  # not the previous epoch's beside the new one
            rng = np.random.default_rng([seed, epoch])
            variants = [self._draw(side, rng) for side in SIDES]  # (W,) per side
            drawn = [self._segment(side, v) for side, v in zip(SIDES, variants, strict=True)]
            keep = self._breaks_rules(drawn[0][1], drawn[1][1])  # (M,) keep deterministic ids
            sides = []
            for side, chosen, (tokens, lengths) in zip(SIDES, variants, drawn, strict=True):
                if keep.any():  # those pairs' words take variant 0, then segment again
                    counts = self.segmentations[f"{side}_counts"].astype(np.int64)
                    chosen -= np.where(np.repeat(keep, counts), chosen % (SAMPLES_PER_WORD + 1), 0)
                    tokens, lengths = self._segment(side, chosen)
                sides += [tokens, np.concatenate([[0], np.cumsum(lengths)])]
            self._data, self._key = ParallelDataset(*sides, self.line_numbers), (seed, epoch)
        return self._data

    def _draw(self, side: str, rng: np.random.Generator) -> np.ndarray:
        """One sample (1..S) for every word occurrence: its variant ids (W,)."""
        words = self.segmentations[f"{side}_words"]
        choice = rng.integers(1, SAMPLES_PER_WORD + 1, len(words))  # (W,)
        return words.astype(np.int64) * (SAMPLES_PER_WORD + 1) + choice

    def _segment(self, side: str, variants: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flat tokens and tokens per corpus row (M,) of the chosen word variants."""
        arrays = self.segmentations
        counts = arrays[f"{side}_counts"].astype(np.int64)
        return concatenate_pieces(
            arrays[f"{side}_pieces"], arrays[f"{side}_offsets"], variants, counts
        )

    def _breaks_rules(self, src_len: np.ndarray, tgt_len: np.ndarray) -> np.ndarray:
        """(M,) rows whose sampled pair breaks the filter's rules (dataset.filter_pairs)."""
        broken = (src_len > self.max_len) | (tgt_len > self.max_len)
        if self.max_len_ratio is not None:
            longer, shorter = (
                np.maximum(src_len, tgt_len),
                np.maximum(np.minimum(src_len, tgt_len), 1),
            )
            broken |= longer / shorter > self.max_len_ratio
        return broken
