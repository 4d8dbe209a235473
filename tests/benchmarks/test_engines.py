"""The "ours" engine of the benchmark keeps the project's CPU speed-up (transformer/cpu/onednn.py).

The model is built from plain `nn.Linear` layers and the searches no longer pack weights by
themselves, so the engine must swap the layers for training and decode inside
`prepacked_weights`; without these tests the benchmark could silently measure MKL instead.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from benchmarks import engines
from benchmarks.engines import EOS_ID, Dims, Engine, EosSuppressed, random_batch, random_sources
from transformer.cpu import onednn
from transformer.cpu.onednn import OneDNNLinear, use_onednn

TINY = Dims(vocab_size=64, d_model=32, d_ff=64, n_heads=4, n_layers=2, max_positions=256)

needs_onednn = pytest.mark.skipif(
    not use_onednn("auto", torch.device("cpu")),
    reason="train.linear_kernel auto does not use oneDNN here (not x86-64, or no operator)",
)


def _linear_layers(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


@pytest.fixture
def onednn_calls(monkeypatch):
    """Weights of every product computed by oneDNN (the live or the packed weight)."""
    calls: list[torch.Tensor] = []
    real = onednn._onednn_matmul

    def counting(x, w, b):
        calls.append(w)
        return real(x, w, b)

    monkeypatch.setattr(onednn, "_onednn_matmul", counting)
    return calls


@needs_onednn
def test_ours_trains_with_its_linear_layers_swapped_for_onednn(onednn_calls):
    engine = Engine("ours", TINY, seed=0)
    layers = _linear_layers(engine.model)
    assert engine.onednn and layers and all(type(m) is OneDNNLinear for m in layers)
    assert engine.describe()["linear_layers"] == "oneDNN"
    engine.train(random_batch(2, 6, TINY.vocab_size, seed=0), steps=1)
    assert len(onednn_calls) >= 2 * len(layers)  # forward and dL/dW at least
    onednn_calls.clear()
    engine.train(random_batch(2, 6, TINY.vocab_size, seed=0), steps=1, bf16=True)
    assert not onednn_calls  # bf16 autocast: torch.nn.functional.linear, as before the swap


@needs_onednn
@pytest.mark.parametrize(("sentences", "beam_size"), [(4, 1), (2, 2)])
def test_ours_decodes_inside_prepacked_weights(monkeypatch, onednn_calls, sentences, beam_size):
    """Rows per step = sentences x beams; every swapped layer of the wrapped model is packed."""
    entered = []
    real = engines.prepacked_weights

    @contextlib.contextmanager
    def spy(model, rows=None):
        with real(model, rows):
            packed = [m._packed[0] for m in model.modules() if getattr(m, "_packed", None)]
            entered.append((model, rows, packed))
            yield

    monkeypatch.setattr(engines, "prepacked_weights", spy)
    engine = Engine("ours", TINY, seed=0)
    src = random_sources(sentences, 5, TINY.vocab_size, seed=1)
    tokens = engine.decode(src, 6, beam_size=beam_size)["tokens"]
    assert all(len(row) == 6 and EOS_ID not in row for row in tokens)
    [(model, rows, packed)] = entered
    assert isinstance(model, EosSuppressed) and model.model is engine.model
    assert rows == sentences * beam_size
    assert len(packed) == len(_linear_layers(engine.model))  # packing reached the inner model
    used = [w for w in onednn_calls if any(w is p for p in packed)]
    assert len(used) == len(onednn_calls) > 0  # every product of the search used a packed weight
    assert all(m._packed is None for m in engine.model.modules() if type(m) is OneDNNLinear)


def test_the_peers_keep_their_plain_layers():
    engine = Engine("torch_nn", TINY, seed=0)
    assert not engine.onednn
    assert not [m for m in engine.model.modules() if isinstance(m, OneDNNLinear)]
    assert "linear_layers" not in engine.describe()


def test_ours_keeps_plain_layers_where_the_policy_says_torch(monkeypatch):
    monkeypatch.setattr(engines, "use_onednn", lambda *args, **kwargs: False)
    engine = Engine("ours", TINY, seed=0)
    assert not engine.onednn and all(type(m) is nn.Linear for m in _linear_layers(engine.model))
    assert engine.describe()["linear_layers"] == "torch.nn.Linear"
    src = random_sources(4, 5, TINY.vocab_size, seed=1)
    assert len(engine.decode(src, 6)["tokens"]) == 4
