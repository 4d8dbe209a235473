"""Tests for transformer/attention_backends.py: GPU jobs leave cuDNN's fused attention out.

Reference: torch's own switches (`torch.backends.cuda.*_sdp_enabled`), which can be read and
set without a GPU; the wiring is checked by recording what the trainer and the translator ask.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

import transformer.decode.translator as translator_module
import transformer.train.trainer as trainer_module
from transformer.attention_backends import avoid_cudnn_attention, without_cudnn_attention
from transformer.decode.translator import Translator
from transformer.train.trainer import Trainer

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)
SWITCHES = ("flash", "mem_efficient", "math", "cudnn")


def switches() -> dict:
    return {name: getattr(torch.backends.cuda, f"{name}_sdp_enabled")() for name in SWITCHES}


def set_switches(values: dict) -> None:
    for name, on in values.items():
        getattr(torch.backends.cuda, f"enable_{name}_sdp")(on)


@pytest.fixture
def all_switched_on():
    """Every SDPA backend switched on; torch's switches restored after the test."""
    before = switches()
    set_switches(dict.fromkeys(SWITCHES, True))
    yield
    set_switches(before)


def test_a_gpu_training_job_switches_cudnn_attention_off(all_switched_on):
    avoid_cudnn_attention(CUDA)
    assert switches() == {"flash": True, "mem_efficient": True, "math": True, "cudnn": False}


def test_a_cpu_job_leaves_the_switches_alone(all_switched_on):
    avoid_cudnn_attention(CPU)
    with without_cudnn_attention(CPU):
        assert all(switches().values())
    assert all(switches().values())


def test_decoding_on_a_gpu_leaves_cudnn_out_only_while_it_runs(all_switched_on):
    torch.backends.cuda.enable_flash_sdp(False)  # a user's own choice is kept
    with without_cudnn_attention(CUDA):
        assert switches() == {"flash": False, "mem_efficient": True, "math": True, "cudnn": False}
    assert switches() == {"flash": False, "mem_efficient": True, "math": True, "cudnn": True}


def test_with_only_cudnn_switched_on_decoding_falls_back_to_the_math_backend(all_switched_on):
    set_switches({"flash": False, "mem_efficient": False, "math": False})
    with without_cudnn_attention(CUDA):
        assert switches() == {"flash": False, "mem_efficient": False, "math": True, "cudnn": False}


def test_the_trainer_and_the_translator_ask_for_their_device(
    monkeypatch, tiny_model, tiny_tokenizer, tiny_run, tmp_path
):
    asked = []

    def record(device):
        asked.append(device)
        return contextlib.nullcontext()

    monkeypatch.setattr(trainer_module, "avoid_cudnn_attention", record)
    monkeypatch.setattr(translator_module, "without_cudnn_attention", record)
    overrides = [f"train.output_dir={tmp_path / 'run'}", "train.max_steps=1"]
    Trainer(tiny_run.load(overrides), resume=False)
    translator = Translator(tiny_model, tiny_tokenizer, device="cpu")
    translator.translate(["A dog runs.", "A child reads a book."], beam_size=2, max_tokens=8)
    translator.score("A dog runs.", "Ein Hund rennt.")
    assert asked[0] == CPU and len(asked) >= 3 and set(asked) == {CPU}
