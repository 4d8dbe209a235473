"""Shared pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared real-data directory: $TRANSFORMER_DATA_DIR, else `<repo>/../shared/data`.

    Fails (never skips) when it is missing: CI always has it, so a missing directory is a
    broken setup, not a reason to silently test less.
    """
    configured = os.environ.get("TRANSFORMER_DATA_DIR")
    path = (
        Path(configured) if configured else Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    if not (path / "multi30k" / "train.en").is_file():
        pytest.fail(
            f"shared data not found at {path} (expected multi30k/train.en there); set "
            "TRANSFORMER_DATA_DIR to the directory holding multi30k/",
            pytrace=False,
        )
    return path


# A tiny parallel corpus for the fixtures below (and for tests that need a few real sentences).
ENGLISH = [
    "A man is riding a horse.",
    "Two dogs play in the snow.",
    "A woman reads a book in the park.",
    "The child runs to the train station.",
    "People are waiting at the station.",
]
GERMAN = [
    "Ein Mann reitet ein Pferd.",
    "Zwei Hunde spielen im Schnee.",
    "Eine Frau liest ein Buch im Park.",
    "Das Kind rennt zum Bahnhof.",
    "Leute warten am Bahnhof.",
]


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A joint 60-piece SentencePiece model trained on `ENGLISH + GERMAN` (well under 1 s)."""
    from transformer.data.tokenizer import Tokenizer

    return Tokenizer(Tokenizer.train(ENGLISH + GERMAN, 60))


@pytest.fixture(scope="session")
def make_model():
    """Factory: `make_model(vocab_size, seed=0, **overrides)` -> a random small `Transformer`
    (2 + 2 layers, 4 heads, d_model 32, d_ff 64, 128 positions) in eval mode."""
    import torch

    from transformer import ModelConfig, Transformer

    def make(vocab_size: int, seed: int = 0, **overrides) -> Transformer:
        torch.manual_seed(seed)
        sizes = dict(d_model=32, d_ff=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2)
        config = ModelConfig(vocab_size=vocab_size, max_positions=128, **{**sizes, **overrides})
        return Transformer(config).eval()

    return make


@pytest.fixture
def tiny_model(make_model, tiny_tokenizer):
    """A fresh `make_model(tiny_tokenizer.vocab_size)`, the paper's post-norm layout."""
    return make_model(tiny_tokenizer.vocab_size)
