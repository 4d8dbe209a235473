"""Encoding a corpus chunk by chunk into flat token arrays (section 5.1: subword units).

`encode_chunks` turns (source, target) chunks of sentences into the four arrays of a
`ParallelDataset` (tokens and offsets per side), appending each chunk to a cache entry
(`token_cache.ArrayWriter`), so that memory holds one chunk, not the corpus. With a BPE model
(the paper's) sentences are encoded word by word (`word_encoding.WordTable`: SentencePiece runs
once per distinct word); a unigram model, whose Viterbi search breaks ties by position in the
sentence, encodes whole sentences with SentencePiece.

`collect_words` is the first pass of a corpus whose BPE model is not trained yet: it counts the
words that train it (on a sample of sentences when the corpus has more than
`data.spm_input_sentence_size`) and keeps every sentence's word ids in a scratch entry, which
`encode_collected` turns into tokens once the model exists, without reading the text again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from numpy.random import default_rng  # imported now, not lazily mid-work (see below)

from transformer.data.corpus import ParallelText
from transformer.data.dataset import ParallelDataset
from transformer.data.token_cache import ArrayWriter, SequentialReader
from transformer.data.tokenizer import Tokenizer
from transformer.data.word_encoding import WordTable

Chunks = Iterable[tuple[list[str], list[str]]]
SIDES = ("src", "tgt")


def token_dtype(tokenizer: Tokenizer) -> type:
    """uint16 when every id fits in 16 bits (vocabularies up to 65535 pieces), else int32."""
    return (
        np.uint16 if max(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size) <= 65535 else np.int32
    )


def _encoders(tokenizer: Tokenizer) -> list[Callable[[list[str]], tuple[np.ndarray, np.ndarray]]]:
    """Per side: sentences -> (flat tokens, tokens per sentence)."""
    dtype = token_dtype(tokenizer)
    batches = (tokenizer.encode_batch, tokenizer.encode_target_batch)
    if tokenizer.word_level:
        return [WordTable(encode_batch, dtype).encode for encode_batch in batches]
    return [lambda texts, e=encode_batch: _pack(e(texts), dtype) for encode_batch in batches]


def _pack(ids: list[list[int]], dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Nested id lists -> (flat tokens, lengths)."""
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter((t for row in ids for t in row), dtype=dtype, count=int(lengths.sum()))
    return flat, lengths


class _OffsetWriter:
    """Appends one side's tokens and offsets (M + 1 values, from 0) to a cache entry."""

    def __init__(self, writer: ArrayWriter, side: str) -> None:
        self.writer, self.side, self.end = writer, side, 0
        writer.append(f"{side}_offsets", np.zeros(1, dtype=np.int64))

    def append(self, tokens: np.ndarray, lengths: np.ndarray) -> None:
        self.writer.append(f"{self.side}_tokens", tokens)
        self.writer.append(f"{self.side}_offsets", self.end + np.cumsum(lengths))
        self.end += int(lengths.sum())


def encode_chunks(
    chunks: Chunks, tokenizer: Tokenizer, writer: ArrayWriter, progress: Callable[[int], None]
) -> int:
    """Encode every pair of `chunks` into `writer` (arrays src/tgt _tokens and _offsets).

    Args:
        chunks: (source sentences, target sentences) in corpus order.
        tokenizer: The run's tokenizer.
        writer: The cache entry being written (committed by the caller).
        progress: Called with the number of pairs of each finished chunk.

    Returns:
        The number of pairs encoded.
    """
    encoders = _encoders(tokenizer)
    outputs = [_OffsetWriter(writer, side) for side in SIDES]
    pairs = 0
    for chunk in chunks:
        for encode, output, sentences in zip(encoders, outputs, chunk, strict=True):
            output.append(*encode(sentences))
        pairs += len(chunk[0])
        progress(len(chunk[0]))
    return pairs


def encode_corpus(text: ParallelText, tokenizer: Tokenizer) -> ParallelDataset:
    """Encode every pair of a corpus held in memory (a validation set), unfiltered."""
    arrays = {}
    dtype = token_dtype(tokenizer)
    for encode, side, sentences in zip(
        _encoders(tokenizer), SIDES, (text.src, text.tgt), strict=True
    ):
        tokens, lengths = encode(sentences) if sentences else (np.zeros(0, dtype), np.zeros(0))
        arrays[f"{side}_tokens"] = tokens.astype(dtype, copy=False)
        arrays[f"{side}_offsets"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    lines = np.arange(len(text), dtype=np.int64)
    return ParallelDataset(
        arrays["src_tokens"],
        arrays["src_offsets"],
        arrays["tgt_tokens"],
        arrays["tgt_offsets"],
        lines,
    )


@dataclass
class CollectedWords:
    """What `collect_words` found: one `WordTable` per side and their counts (on the sample).

    Attributes:
        tables: Source and target tables (words without their pieces yet).
        counts: Occurrences of each word id in the sampled sentences, per side.
        pairs: Pairs read.
    """

    tables: list[WordTable]
    counts: list[np.ndarray]
    pairs: int


def collect_words(
    chunks: Chunks,
    sample_rate: float,
    seed: int,
    scratch: ArrayWriter,
    progress: Callable[[int], None],
) -> CollectedWords:
    """First pass over a corpus: word ids of every sentence (into `scratch`) and word counts.

    Args:
        chunks: (source sentences, target sentences) in corpus order.
        sample_rate: Fraction of sentences whose words are counted (1.0: all), each kept
            with this probability, independently per side.
        seed: Seeds the sample (the same corpus and seed give the same counts).
        scratch: Entry that receives `<side>_words` (int32 or int64) and `<side>_counts`.
        progress: Called with the number of pairs of each finished chunk.
    """
    tables = [WordTable(None, np.int32) for _ in SIDES]
    counts = [np.zeros(0, dtype=np.int64) for _ in SIDES]
    # numpy imports np.random on first use, and a Ctrl-C / SIGTERM that lands inside that
    # import is lost (numpy 2.4); the import at the top of this module avoids it.
    rng = default_rng(seed)
    pairs = 0
    for chunk in chunks:
        for i, (table, sentences) in enumerate(zip(tables, chunk, strict=True)):
            ids, per_sentence = table.word_ids(sentences)
            scratch.append(f"{SIDES[i]}_words", ids.astype(np.int32))  # < 2**31 words
            scratch.append(f"{SIDES[i]}_counts", per_sentence)
            if sample_rate < 1.0:
                ids = ids[np.repeat(rng.random(len(sentences)) < sample_rate, per_sentence)]
            found = table.counts(ids)
            found[: len(counts[i])] += counts[i]
            counts[i] = found
        pairs += len(chunk[0])
        progress(len(chunk[0]))
    return CollectedWords(tables, counts, pairs)


def encode_collected(
    collected: CollectedWords,
    scratch_path,
    tokenizer: Tokenizer,
    writer: ArrayWriter,
    progress: Callable[[int], None],
    chunk_pairs: int = 100_000,
) -> int:
    """Second pass: the word ids that `collect_words` kept, as tokens of the trained model.

    Returns:
        The number of pairs encoded (as `encode_chunks`, into `writer`).
    """
    # The word ids are read in order, not mapped: mapped, the pages read would stay resident.
    readers = [SequentialReader(scratch_path, f"{side}_words") for side in SIDES]
    per_side = [SequentialReader(scratch_path, f"{side}_counts") for side in SIDES]
    dtype = token_dtype(tokenizer)
    outputs = [_OffsetWriter(writer, side) for side in SIDES]
    for table, encode_batch in zip(
        collected.tables, (tokenizer.encode_batch, tokenizer.encode_target_batch), strict=True
    ):
        table.encode_batch, table.dtype = encode_batch, dtype
    try:
        for first in range(0, collected.pairs, chunk_pairs):
            size = min(chunk_pairs, collected.pairs - first)
            for i, (table, output) in enumerate(zip(collected.tables, outputs, strict=True)):
                counts = per_side[i].read(size).astype(np.int64)
                ids = readers[i].read(int(counts.sum())).astype(np.int64)
                output.append(*table.tokens(ids, counts))
            progress(size)
    finally:
        for reader in readers + per_side:
            reader.close()
    return collected.pairs
