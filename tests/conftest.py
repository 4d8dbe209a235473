"""Shared pytest fixtures: real data, small tokenizers and models, checkpoints, training runs.

Helpers that several test files need are fixtures here (a fixture may return a function), so
that no test module imports another and each small model or tokenizer is built in one place.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared real-data directory: $TRANSFORMER_DATA_DIR, else `<repo>/../shared/data`.

    Fails (never skips) when it is missing: CI always has it, so a missing directory is a
    broken setup, not a reason to silently test less.
    """
    configured = os.environ.get("TRANSFORMER_DATA_DIR")
    path = Path(configured) if configured else REPO.parent / "shared" / "data"
    if not (path / "multi30k" / "train.en").is_file():
        pytest.fail(
            f"shared data not found at {path} (expected multi30k/train.en there); set "
            "TRANSFORMER_DATA_DIR to the directory holding multi30k/",
            pytrace=False,
        )
    return path


# ---------------------------------------------------------------------------------------------
# Tokenizers

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
WORDS = "a man woman dog cat is eats runs plays in the park with red ball big small".split()


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A joint 60-piece SentencePiece model trained on `ENGLISH + GERMAN` (well under 1 s)."""
    from transformer.data.tokenizer import Tokenizer

    return Tokenizer(Tokenizer.train(ENGLISH + GERMAN, 60))


@pytest.fixture(scope="session")
def synthetic_sentences():
    """`synthetic_sentences(count, seed=0)` -> random sentences of 1 to 9 words from `WORDS`."""

    def sentences(count: int, seed: int = 0) -> list[str]:
        rng = random.Random(seed)
        return [" ".join(rng.choices(WORDS, k=rng.randint(1, 9))) + "." for _ in range(count)]

    return sentences


@pytest.fixture(scope="session")
def synthetic_tokenizer(synthetic_sentences):
    """A 60-piece SentencePiece model of 300 `synthetic_sentences`: every piece of their words
    is in the vocabulary, so any synthetic sentence round-trips."""
    from transformer.data.tokenizer import Tokenizer

    return Tokenizer(Tokenizer.train(synthetic_sentences(300), vocab_size=60))


# ---------------------------------------------------------------------------------------------
# Models

SMALL = dict(
    d_model=32, d_ff=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, max_positions=128
)


@pytest.fixture(scope="session")
def model_config():
    """Factory: `model_config(vocab_size, **overrides)` -> the `ModelConfig` of `make_model`
    (2 + 2 layers, 4 heads, d_model 32, d_ff 64, 128 positions; other fields at defaults)."""
    from transformer import ModelConfig

    def make(vocab_size: int, **overrides) -> ModelConfig:
        return ModelConfig(vocab_size=vocab_size, **{**SMALL, **overrides})

    return make


@pytest.fixture(scope="session")
def make_model(model_config):
    """Factory: `make_model(vocab_size, seed=0, **overrides)` -> a random small `Transformer`
    (see `model_config`) in eval mode."""
    import torch

    from transformer import Transformer

    def make(vocab_size: int, seed: int = 0, **overrides) -> Transformer:
        torch.manual_seed(seed)
        return Transformer(model_config(vocab_size, **overrides)).eval()

    return make


@pytest.fixture
def tiny_model(make_model, tiny_tokenizer):
    """A fresh `make_model(tiny_tokenizer.vocab_size)`, the paper's post-norm layout."""
    return make_model(tiny_tokenizer.vocab_size)


@pytest.fixture(scope="session")
def make_search_model(make_model):
    """Factory: `make_search_model(vocab_size=40, seed=0, eos_boost=2.5, **overrides)` -> a
    `make_model` without dropout whose eos embedding is scaled by `eos_boost`, so that some
    greedy and beam outputs end before their length limit and some do not."""
    import torch

    def make(vocab_size: int = 40, seed: int = 0, eos_boost: float = 2.5, **overrides):
        model = make_model(vocab_size, seed, **{"dropout": 0.0, **overrides})
        with torch.no_grad():
            model.tgt_embed.weight[model.config.eos_id] *= eos_boost
        return model

    return make


@pytest.fixture(scope="module")
def translation_model(make_search_model, synthetic_tokenizer):
    """A search model over `synthetic_tokenizer`'s vocabulary, with the default dropout (0.1),
    so that a forgotten `model.eval()` would change its translations (one per test module)."""
    return make_search_model(synthetic_tokenizer.vocab_size, dropout=0.1)


@pytest.fixture(scope="session")
def random_batch():
    """`random_batch(seed, vocab_size, lengths)` -> right-padded source ids (B, S) with the
    given lengths, drawn from [4, vocab_size) (no special tokens)."""
    import torch

    def batch(seed: int, vocab_size: int, lengths: list[int]) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        src = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
        for row, length in enumerate(lengths):
            src[row, :length] = torch.randint(4, vocab_size, (length,), generator=generator)
        return src

    return batch


@pytest.fixture(scope="session")
def teacher_forced_log_prob():
    """`teacher_forced_log_prob(model, src_row, tokens, finished)` -> (log P(tokens [+ eos] |
    src), the (T, V) log-probabilities) from one full forward pass (no cache, no padding):
    the reference for the searches' scores."""
    import torch

    def log_prob(model, src_row: torch.Tensor, tokens: list[int], finished: bool):
        config = model.config
        src = src_row[src_row.ne(config.pad_id)].unsqueeze(0)  # (S,) -> (1, S)
        target = tokens + ([config.eos_id] if finished else [])
        tgt_in = torch.tensor([[config.bos_id] + target[:-1]])
        with torch.no_grad():
            log_probs = torch.log_softmax(model(src, tgt_in).float(), dim=-1)[0]  # (T, V)
        return log_probs[torch.arange(len(target)), torch.tensor(target)].sum().item(), log_probs

    return log_prob


# ---------------------------------------------------------------------------------------------
# torch.nn references


@pytest.fixture(scope="session")
def copy_attention():
    """`copy_attention(ours, ref)`: our q/k/v/out projections into a torch.nn.MultiheadAttention."""
    import torch

    def copy(ours, ref) -> None:
        with torch.no_grad():
            ref.in_proj_weight.copy_(
                torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
            )
            ref.in_proj_bias.copy_(
                torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias])
            )
            ref.out_proj.weight.copy_(ours.out_proj.weight)
            ref.out_proj.bias.copy_(ours.out_proj.bias)

    return copy


@pytest.fixture(scope="session")
def copy_layer_common():
    """`copy_layer_common(ours, ref)`: the feed-forward network and layer norms of one of our
    encoder/decoder layers into a torch.nn.TransformerEncoderLayer/TransformerDecoderLayer."""
    import torch

    def copy(ours, ref) -> None:
        with torch.no_grad():
            ref.linear1.load_state_dict(ours.feed_forward.linear1.state_dict())
            ref.linear2.load_state_dict(ours.feed_forward.linear2.state_dict())
            for name in ("norm1", "norm2", "norm3"):
                if hasattr(ours, name):
                    getattr(ref, name).load_state_dict(getattr(ours, name).state_dict())

    return copy


@pytest.fixture
def no_mha_fast_path():
    """torch.nn's inference fast path returns zeros at padded positions; compare the plain path."""
    import torch

    torch.backends.mha.set_fastpath_enabled(False)
    yield
    torch.backends.mha.set_fastpath_enabled(True)


# ---------------------------------------------------------------------------------------------
# Checkpoints


@pytest.fixture(scope="session")
def checkpoint_state():
    """`checkpoint_state(model, tokenizer, step=0, **entries)` -> a checkpoint dict in the
    documented format (transformer/checkpoint.py): weights, model config, a full config with
    that model section, the tokenizer's model bytes; `entries` add or replace entries."""
    from transformer.checkpoint import FORMAT_VERSION
    from transformer.config import Config, config_to_dict

    def state(model, tokenizer, step: int = 0, /, **entries) -> dict:
        return {
            "format_version": FORMAT_VERSION,
            "model": model.state_dict(),
            "model_config": dataclasses.asdict(model.config),
            "config": config_to_dict(Config(model=model.config)),
            "spm_model": tokenizer.src_model_bytes,
            "tgt_spm_model": None if tokenizer.shared else tokenizer.tgt_model_bytes,
            "step": step,
            **entries,
        }

    return state


@pytest.fixture(scope="session")
def write_checkpoint(checkpoint_state):
    """`write_checkpoint(path, model, tokenizer, step=0, **entries)` -> `path`, holding
    `checkpoint_state(...)` written by `save_checkpoint`."""
    from transformer.checkpoint import save_checkpoint

    def write(path, model, tokenizer, step: int = 0, /, **entries):
        save_checkpoint(checkpoint_state(model, tokenizer, step, **entries), path)
        return path

    return write


@pytest.fixture(scope="session")
def write_filled_checkpoint(make_model, tiny_tokenizer, write_checkpoint):
    """`write_filled_checkpoint(path, fill, step, model_overrides=None, weights=None,
    **entries)` -> `path`: a checkpoint of `make_model(tiny_tokenizer.vocab_size,
    **model_overrides)` with every parameter equal to `fill` (so that an average has a closed
    form); `weights` adds or replaces entries of its state dict."""
    import torch

    def write(path, fill, step, /, model_overrides=None, weights=None, **entries):
        model = make_model(tiny_tokenizer.vocab_size, **(model_overrides or {}))
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.fill_(fill)
        state = {**model.state_dict(), **(weights or {})}
        return write_checkpoint(path, model, tiny_tokenizer, step, model=state, **entries)

    return write


# ---------------------------------------------------------------------------------------------
# Training runs on configs/tiny.yaml


class TinyRun:
    """Training runs with configs/tiny.yaml on a slice of Multi30k (CPU, seconds).

    Attributes:
        config_path: configs/tiny.yaml.
        fast: Overrides for small, fast runs: no validation, one thread, every step logged.
    """

    config_path = REPO / "configs" / "tiny.yaml"
    fast = ["data.valid=null", "train.log_interval_steps=1", "train.num_threads=1"]

    def __init__(self, shared_data: Path) -> None:
        self.shared_data = shared_data

    def load(self, overrides: list[str]):
        """`load_config(configs/tiny.yaml, overrides)`."""
        from transformer.config import load_config

        return load_config(self.config_path, overrides)

    @staticmethod
    def records(run_dir: Path, kind: str = "train") -> list[dict]:
        """The `{"type": kind}` records of the run's metrics.jsonl, in order."""
        lines = (Path(run_dir) / "metrics.jsonl").read_text().splitlines()
        return [r for r in map(json.loads, lines) if r["type"] == kind]

    def python(self, args: list[str], check: bool = True) -> subprocess.CompletedProcess:
        """Run `python ARGS` from the repository root with the shared data and one thread."""
        env = dict(os.environ)
        env.update(TRANSFORMER_DATA_DIR=str(self.shared_data), OMP_NUM_THREADS="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        result = subprocess.run(
            [sys.executable, *args], env=env, capture_output=True, text=True, cwd=REPO
        )
        if check and result.returncode != 0:
            raise AssertionError(f"exit {result.returncode}\n{result.stdout}\n{result.stderr}")
        return result


@pytest.fixture
def tiny_run(shared_data, monkeypatch) -> TinyRun:
    """A `TinyRun`, with $TRANSFORMER_DATA_DIR set to the shared data for in-process runs."""
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    return TinyRun(shared_data)
