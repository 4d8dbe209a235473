"""SentencePiece subword tokenizer with the fixed special ids of `ModelConfig`.

The paper (section 5.1) encodes English-German with a shared source-target byte-pair vocabulary
of about 37000 tokens. `Tokenizer.train` learns such a joint model with SentencePiece (Kudo and
Richardson, 2018; BPE by default, unigram as an option); passing a second model gives separate
source and target vocabularies. A tokenizer is fully described by the serialized model bytes,
so a checkpoint that stores `src_model_bytes` (and `tgt_model_bytes`) can tokenize on its own.

Special ids are fixed: pad=0, unk=1, bos=2, eos=3 (the `ModelConfig` defaults). `encode*`
never adds bos/eos; the batching code adds them to the target side. Text is normalized by
SentencePiece's default `nmt_nfkc` rule (NFKC, extra whitespace removed), so
decode(encode(s)) == s for text in that normal form whose characters are in the vocabulary;
characters outside it become unk (id 1, decoded as " ⁇ ").
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import sentencepiece as spm

from transformer.atomic import atomic_write
from transformer.data.spm_model import trainer_facts

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
SPM_MODEL_TYPES = ("bpe", "unigram")


def usable_cores() -> int:
    """CPU cores this process may use (its affinity on Linux, else all of the machine's).

    SentencePiece's thread count for training and encoding; `make demo` shares them out
    between its training processes (scripts/quickstart.py).
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _load(model_bytes: bytes, what: str) -> spm.SentencePieceProcessor:
    """Build a processor from serialized bytes and check its special ids."""
    if not isinstance(model_bytes, bytes | bytearray) or not model_bytes:
        raise ValueError(f"{what} SentencePiece model must be non-empty bytes")
    processor = spm.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(bytes(model_bytes))
    except (RuntimeError, OSError) as error:
        raise ValueError(f"{what} bytes are not a valid SentencePiece model: {error}") from error
    ids = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
    if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
        raise ValueError(
            f"{what} SentencePiece model has special ids (pad, unk, bos, eos) = {ids}, "
            f"expected {(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}; train it with Tokenizer.train"
        )
    return processor


class Tokenizer:
    """Source and target SentencePiece models (one shared model by default).

    Args:
        src_model_bytes: Serialized SentencePiece model for the source side (or both sides).
        tgt_model_bytes: Serialized model for the target side; None shares the source model.

    Raises:
        ValueError: when the bytes are not a SentencePiece model or its special ids differ from
            pad=0, unk=1, bos=2, eos=3.

    Example:
        >>> tok = Tokenizer.from_file("checkpoints/run/spm.model")
        >>> ids = tok.encode_target("Ein Hund läuft.")
        >>> tok.decode(ids)
        'Ein Hund läuft.'
    """

    pad_id = PAD_ID
    unk_id = UNK_ID
    bos_id = BOS_ID
    eos_id = EOS_ID

    def __init__(self, src_model_bytes: bytes, tgt_model_bytes: bytes | None = None) -> None:
        self.src_model_bytes = bytes(src_model_bytes)
        self.shared = tgt_model_bytes is None
        self.tgt_model_bytes = self.src_model_bytes if self.shared else bytes(tgt_model_bytes)
        self._src = _load(self.src_model_bytes, "source" if not self.shared else "shared")
        self._tgt = self._src if self.shared else _load(self.tgt_model_bytes, "target")

    @property
    def src_vocab_size(self) -> int:
        """Number of source pieces V (special tokens included)."""
        return self._src.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        """Number of target pieces (equals `src_vocab_size` when shared)."""
        return self._tgt.get_piece_size()

    @property
    def word_level(self) -> bool:
        """Whether both models are BPE models that split at whitespace: then a sentence's ids
        are its words' ids, one after the other (`transformer.data.word_encoding`)."""
        facts = {trainer_facts(b) for b in (self.src_model_bytes, self.tgt_model_bytes)}
        return all(f.model_type == "bpe" and f.split_by_whitespace for f in facts)

    @property
    def vocab_size(self) -> int:
        """The source vocabulary size (the shared one when `shared`)."""
        return self.src_vocab_size

    @classmethod
    def from_file(cls, src_path: str | Path, tgt_path: str | Path | None = None) -> Tokenizer:
        """Load from `.model` files written by `save` (or by SentencePiece itself).

        Raises:
            FileNotFoundError: naming a missing model file.
        """
        paths = [Path(src_path)] + ([Path(tgt_path)] if tgt_path is not None else [])
        for path in paths:
            if not path.is_file():
                raise FileNotFoundError(f"SentencePiece model not found: {path}")
        blobs = [path.read_bytes() for path in paths]
        return cls(blobs[0], blobs[1] if len(blobs) > 1 else None)

    def save(self, directory: str | Path) -> list[Path]:
        """Write `spm.model` (shared) or `spm.src.model` + `spm.tgt.model` into `directory`.

        Each file is written atomically (`transformer.atomic`); `directory` is created.

        Returns:
            The written paths, source first.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if self.shared:
            targets = [(directory / "spm.model", self.src_model_bytes)]
        else:
            targets = [
                (directory / "spm.src.model", self.src_model_bytes),
                (directory / "spm.tgt.model", self.tgt_model_bytes),
            ]
        for path, blob in targets:
            atomic_write(path, lambda file, blob=blob: file.write(blob))
        return [path for path, _ in targets]

    @staticmethod
    def train(
        sentences: Iterable[str],
        vocab_size: int,
        model_type: str = "bpe",
        input_sentence_size: int = 10_000_000,
        character_coverage: float = 0.9999,
        seed: int = 1,
    ) -> bytes:
        """Learn a SentencePiece model and return its serialized bytes.

        Call it once on both sides of the training data for a joint vocabulary (section 5.1),
        or once per side for separate vocabularies, then pass the bytes to `Tokenizer`.

        Args:
            sentences: Training text, one sentence per item (empty items are skipped).
            vocab_size: Number of pieces, special tokens included.
            model_type: "bpe" (byte-pair encoding, as in the paper) or "unigram".
            input_sentence_size: At most this many sentences are sampled (SentencePiece's
                `input_sentence_size` with `shuffle_input_sentence`) for large corpora.
            character_coverage: Fraction of characters covered by the alphabet; the rest map
                to unk.
            seed: Seeds SentencePiece's sampling, so the same input gives the same model.

        Returns:
            The model as bytes (`Tokenizer(bytes)` loads it).

        Raises:
            ValueError: for an unknown model type, or when SentencePiece rejects the input
                (for example a vocabulary larger than the text allows), with its message.
        """
        options = dict(input_sentence_size=input_sentence_size, shuffle_input_sentence=True)
        return _train(
            _non_empty(sentences), vocab_size, model_type, character_coverage, seed, **options
        )

    @staticmethod
    def train_from_word_counts(
        counts: Mapping[str, int],
        vocab_size: int,
        model_type: str = "bpe",
        character_coverage: float = 0.9999,
        seed: int = 1,
    ) -> bytes:
        """Learn a SentencePiece model from word counts (SentencePiece's `tsv` input).

        SentencePiece BPE splits sentences into words before it learns merges, so a corpus's
        word counts (`transformer.data.word_encoding.word_counts`) give the BPE model of its
        sentences (a test compares them), in a fraction of the time and memory. (A unigram
        model's seed pieces come from whole sentences: it differs.)

        Args:
            counts: word -> number of occurrences; words hold no whitespace.
            vocab_size, model_type, character_coverage, seed: As in `train`.

        Returns:
            The model as bytes.

        Raises:
            ValueError: as `train`.
        """
        lines = (f"{word}\t{count}" for word, count in counts.items() if count > 0)
        options = dict(input_format="tsv", input_sentence_size=0)
        return _train(lines, vocab_size, model_type, character_coverage, seed, **options)

    def encode(self, text: str) -> list[int]:
        """Source text -> ids (no bos/eos); characters outside the vocabulary become unk."""
        return self._src.encode(text, out_type=int)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Source texts -> ids, encoded by SentencePiece on all cores."""
        return self._src.encode(list(texts), out_type=int, num_threads=usable_cores())

    def encode_target(self, text: str) -> list[int]:
        """Target text -> ids (no bos/eos)."""
        return self._tgt.encode(text, out_type=int)

    def encode_target_batch(self, texts: list[str]) -> list[list[int]]:
        """Target texts -> ids, encoded by SentencePiece on all cores."""
        return self._tgt.encode(list(texts), out_type=int, num_threads=usable_cores())

    def _strip(self, ids: Iterable[int]) -> list[int]:
        """Cut at the first eos and drop pad/bos (decoder outputs contain them)."""
        kept = []
        for token in ids:
            token = int(token)
            if token == EOS_ID:
                break
            if token not in (PAD_ID, BOS_ID):
                kept.append(token)
        return kept

    def decode(self, ids: Iterable[int]) -> str:
        """Target ids -> text; stops at eos, ignores pad and bos."""
        return self._tgt.decode(self._strip(ids))

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        """Target id lists -> texts (see `decode`)."""
        return self._tgt.decode([self._strip(ids) for ids in batch])

    def source_pieces(self, ids: Iterable[int]) -> list[str]:
        """Source ids -> subword strings (e.g. '▁Two'), for attention plots."""
        return [self._src.id_to_piece(int(i)) for i in ids]

    def target_pieces(self, ids: Iterable[int]) -> list[str]:
        """Target ids -> subword strings."""
        return [self._tgt.id_to_piece(int(i)) for i in ids]


def _non_empty(sentences: Iterable[str]) -> Iterator[str]:
    """Skip blank sentences (SentencePiece would count them against input_sentence_size)."""
    for sentence in sentences:
        if sentence.strip():
            yield sentence


def _train(
    lines: Iterable[str],
    vocab_size: int,
    model_type: str,
    character_coverage: float,
    seed: int,
    **options,
) -> bytes:
    """Run `SentencePieceTrainer.train` on `lines` with the fixed special ids (see `train`)."""
    if model_type not in SPM_MODEL_TYPES:
        raise ValueError(
            f"spm_model_type {model_type!r} must be one of {', '.join(SPM_MODEL_TYPES)}"
        )
    spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            num_threads=usable_cores(),
            minloglevel=2,
            **options,
        )
    except RuntimeError as error:
        if "KeyboardInterrupt" in str(error):  # Ctrl-C while its C++ code ran its input
            raise KeyboardInterrupt from None
        raise ValueError(f"SentencePiece training failed: {error}") from error
    return model.getvalue()
