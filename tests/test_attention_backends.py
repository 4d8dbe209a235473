"""Tests for transformer/attention_backends.py: jobs on a GPU switch cuDNN's fused attention off.

Reference: torch's own switch (`torch.backends.cuda.cudnn_sdp_enabled`), which can be read and
set without a GPU; the wiring is checked by recording what the trainer and the translator ask.
"""

from __future__ import annotations

import pytest
import torch

import transformer.decode.translator as translator_module
import transformer.train.trainer as trainer_module
from transformer.attention_backends import avoid_cudnn_attention
from transformer.decode.translator import Translator
from transformer.train.trainer import Trainer


@pytest.fixture
def cudnn_switch():
    """torch's cuDNN-attention switch, switched on, and restored after the test."""
    before = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(True)
    yield
    torch.backends.cuda.enable_cudnn_sdp(before)


def test_a_gpu_job_switches_cudnn_attention_off(cudnn_switch):
    avoid_cudnn_attention(torch.device("cuda", 0))
    assert torch.backends.cuda.cudnn_sdp_enabled() is False
    # The other fused kernels stay for torch to choose from.
    assert torch.backends.cuda.mem_efficient_sdp_enabled() is True


def test_a_cpu_job_leaves_the_switches_alone(cudnn_switch):
    avoid_cudnn_attention(torch.device("cpu"))
    assert torch.backends.cuda.cudnn_sdp_enabled() is True


def test_the_translator_and_the_trainer_ask_for_their_device(
    monkeypatch, tiny_model, tiny_tokenizer, tiny_run, tmp_path
):
    asked = []
    for module in (translator_module, trainer_module):
        monkeypatch.setattr(module, "avoid_cudnn_attention", asked.append)
    Translator(tiny_model, tiny_tokenizer, device="cpu")
    overrides = [f"train.output_dir={tmp_path / 'run'}", "train.max_steps=1"]
    Trainer(tiny_run.load(overrides), resume=False)
    assert asked == [torch.device("cpu"), torch.device("cpu")]
