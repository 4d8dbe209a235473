"""Reading a SentencePiece model's training settings from its bytes; the references are the
settings it was trained with and sentencepiece's own protobuf module where it is installed."""

from __future__ import annotations

import io

import pytest
import sentencepiece as spm

from transformer.data.spm_model import trainer_facts

TEXT = ["a man rides a bike", "ein mann fährt rad", "two dogs play", "zwei hunde spielen"] * 30


def train(**options) -> bytes:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TEXT), model_writer=model, minloglevel=2, **options
    )
    return model.getvalue()


@pytest.mark.parametrize(
    "options, model_type, split",
    [
        ({"model_type": "bpe", "vocab_size": 40}, "bpe", True),
        ({"model_type": "unigram", "vocab_size": 30}, "unigram", True),
        ({"model_type": "bpe", "vocab_size": 40, "split_by_whitespace": False}, "bpe", False),
        ({"model_type": "char"}, "char", True),
    ],
)
def test_facts_are_the_training_settings(options, model_type, split):
    model = train(**options)
    facts = trainer_facts(model)
    assert (facts.model_type, facts.split_by_whitespace) == (model_type, split)
    pb2 = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")  # needs protobuf
    proto = pb2.ModelProto()
    proto.ParseFromString(model)
    assert proto.trainer_spec.split_by_whitespace == split
    assert pb2.TrainerSpec.ModelType.Name(proto.trainer_spec.model_type).lower() == model_type


def test_truncated_bytes_are_refused():
    with pytest.raises(ValueError, match="truncated"):
        trainer_facts(train(model_type="bpe", vocab_size=40)[:-3])
