"""What a serialized SentencePiece model says about its training: model type and word splitting.

The model file is a protocol buffer (`sentencepiece_model.proto`: `ModelProto.trainer_spec`
is field 2; in `TrainerSpec`, `model_type` is field 3 (1 unigram, 2 bpe, 3 word, 4 char) and
`split_by_whitespace` field 22, true unless set). `transformer.data.encoding` encodes word by
word only for a BPE model that splits at whitespace; these two fields are all it needs, read
here from the wire format so that no protobuf package is required.
"""

from __future__ import annotations

from dataclasses import dataclass

_MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}


@dataclass(frozen=True)
class TrainerFacts:
    """The two training settings `transformer.data.encoding` depends on.

    Attributes:
        model_type: "unigram", "bpe", "word" or "char".
        split_by_whitespace: Whether no piece spans two space-separated words.
    """

    model_type: str
    split_by_whitespace: bool


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """Decode a base-128 varint at `pos`; returns (value, next position)."""
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes):
    """Yield (field number, wire type, value) of a message; value is bytes for wire type 2."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > len(data):
            raise IndexError(pos)
        yield number, wire, value


def trainer_facts(model_bytes: bytes) -> TrainerFacts:
    """The model type and `split_by_whitespace` of a serialized SentencePiece model.

    Raises:
        ValueError: bytes that are not a model protocol buffer.
    """
    model_type, split = 1, True  # the proto's defaults
    try:
        for number, wire, value in _fields(bytes(model_bytes)):
            if number == 2 and wire == 2:  # ModelProto.trainer_spec
                for inner, inner_wire, inner_value in _fields(value):
                    if inner == 3 and inner_wire == 0:
                        model_type = inner_value
                    elif inner == 22 and inner_wire == 0:
                        split = bool(inner_value)
    except IndexError as error:
        raise ValueError("truncated SentencePiece model") from error
    return TrainerFacts(_MODEL_TYPES.get(model_type, "unigram"), split)
