"""Our SentencePiece model as a Hugging Face fast tokenizer (`tokenizer.json`).

`AutoTokenizer.from_pretrained(DIR)` then loads it offline, without sentencepiece. It must
cut text into the same ids as `transformer.data.tokenizer.Tokenizer`, so it repeats
SentencePiece's steps with the `tokenizers` library, from the settings stored in the model:

1. normalization: the model's precompiled character map (NFKC for the default `nmt_nfkc`),
   then, as its normalizer spec says, extra spaces removed (leading, trailing, repeated),
   a dummy "▁" prefix added, and spaces written as "▁";
2. segmentation: SentencePiece's BPE applies the merge whose result has the highest score
   first; here every normal piece that splits into two normal pieces is a merge, ranked by the
   score of the merged piece (ties by id). Words are cut before each "▁", which no piece
   crosses;
3. no special tokens are added: our sources carry no bos or eos, our targets get bos from the
   decoder start, and eos ends generation. Decoding turns "▁" back into spaces.

Only BPE models (`data.spm_model_type: bpe`, the default) are converted; unigram models and
byte fallback are refused by name. `tests/export/test_huggingface_tokenizer.py` compares the
ids with SentencePiece's on real text.

Source: the SentencePiece model format (`sentencepiece_model.proto`, Kudo and Richardson,
2018) and the `tokenizers` components; the construction is ours.
"""

from __future__ import annotations

from transformer.export.extra import import_extra

NORMAL, UNKNOWN, CONTROL = 1, 2, 3  # SentencePiece piece types
BPE_MODEL_TYPE = 2  # TrainerSpec.model_type


def _model_proto(model_bytes: bytes):
    """The parsed SentencePiece `ModelProto` (its protobuf module needs the `export` extra)."""
    import_extra("google.protobuf")
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model_bytes)
    return proto


def bpe_merges(pieces: list[tuple[str, float, int]]) -> list[tuple[str, str]]:
    """The merges that make SentencePiece's BPE segmentation, best first.

    Args:
        pieces: (piece, score, type) of every id, in id order.

    Returns:
        (left, right) pairs: every split of a normal piece into two normal pieces, ordered by
        the merged piece's score (highest first), then by its id.
    """
    normal = {
        piece: (score, index) for index, (piece, score, kind) in enumerate(pieces) if kind == NORMAL
    }
    ranked = []
    for piece, (score, index) in normal.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in normal and right in normal:
                ranked.append((-score, index, left, right))
    return [(left, right) for _, _, left, right in sorted(ranked)]


def fast_tokenizer(model_bytes: bytes):
    """A `tokenizers.Tokenizer` that encodes and decodes like the SentencePiece model.

    Args:
        model_bytes: A serialized SentencePiece BPE model (`Tokenizer.src_model_bytes`).

    Returns:
        The `tokenizers.Tokenizer`, with <pad>, <unk>, <s>, </s> registered as special tokens.

    Raises:
        MissingExtraError: when tokenizers or protobuf is not installed.
        ValueError: for a unigram model or one with byte fallback.
    """
    tokenizers = import_extra("tokenizers")
    from tokenizers import decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    proto = _model_proto(model_bytes)
    if proto.trainer_spec.model_type != BPE_MODEL_TYPE or proto.trainer_spec.byte_fallback:
        raise ValueError(
            "the Hugging Face tokenizer export supports SentencePiece BPE models without byte "
            f"fallback (data.spm_model_type: bpe); this one has model_type "
            f"{proto.trainer_spec.model_type} and byte_fallback {proto.trainer_spec.byte_fallback}"
        )
    pieces = [(p.piece, p.score, p.type) for p in proto.pieces]
    vocab = {piece: index for index, (piece, _, _) in enumerate(pieces)}
    unk = next(piece for piece, _, kind in pieces if kind == UNKNOWN)
    tokenizer = tokenizers.Tokenizer(
        BPE(vocab=vocab, merges=bpe_merges(pieces), unk_token=unk, fuse_unk=True)
    )
    spec = proto.normalizer_spec
    steps = []
    if spec.precompiled_charsmap:
        steps.append(normalizers.Precompiled(spec.precompiled_charsmap))
    if spec.remove_extra_whitespaces:
        steps.append(normalizers.Strip(left=True, right=True))
        steps.append(normalizers.Replace(tokenizers.Regex(" {2,}"), " "))
    if spec.add_dummy_prefix:
        steps.append(normalizers.Prepend("▁"))
    if spec.escape_whitespaces:
        steps.append(normalizers.Replace(" ", "▁"))
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="never", split=True
    )
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    specials = [piece for piece, _, kind in pieces if kind in (UNKNOWN, CONTROL)]
    tokenizer.add_special_tokens(
        [tokenizers.AddedToken(piece, special=True, normalized=False) for piece in specials]
    )
    return tokenizer
