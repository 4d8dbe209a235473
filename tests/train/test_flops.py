"""Tests for transformer/train/flops.py: the FLOPs of a training step and the GPU peak table.

References: a count worked out by hand for a small config, the closed form for an unpadded
(B, S, T) batch, and an independent counter, `torch.utils.flop_counter.FlopCounterMode`, run
over the forward and backward pass of a real model. The counter adds up every matrix product
(mm, addmm, bmm) it sees, so with the written-out attention kernel ("math": Q K^T and the
weights x V are bmm calls) it counts exactly our convention: each Linear 2 x weights x tokens
forward and twice that backward (input and weight gradients), each attention product
2 x D per query-key pair forward and twice that backward. Two differences, neither used here:
for fused SDPA kernels the counter adds the backward pass's recomputation of Q K^T (3.5 x the
forward's attention FLOPs, model FLOPs convention 3 x), and torch's CPU flash kernel has no
formula (its attention is not counted at all). It also counts padded positions; we count real
tokens, so the padded batch is checked against its sentences run one by one without padding.
"""

from __future__ import annotations

import dataclasses
import types

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from transformer.data.batching import Batch
from transformer.model.config import ModelConfig
from transformer.model.transformer import Transformer
from transformer.train import flops
from transformer.train.flops import (
    PEAK_TFLOPS,
    batch_flops,
    device_peak_flops,
    matmul_arithmetic,
    peak_tflops,
    training_flops,
)

SMALL = ModelConfig(
    vocab_size=50,
    tgt_vocab_size=70,
    share_embeddings=False,
    d_model=16,
    d_ff=24,
    n_heads=2,
    n_encoder_layers=3,
    n_decoder_layers=2,
    dropout=0.0,
    attention_kernel="math",
)


def test_a_count_worked_out_by_hand():
    """D 4, F 6, target vocabulary 10 (source 7), 2 encoder and 1 decoder layer; sentences
    (s, t) = (3, 2) and (1, 2)."""
    config = ModelConfig(
        vocab_size=7,
        tgt_vocab_size=10,
        share_embeddings=False,
        d_model=4,
        d_ff=6,
        n_heads=2,
        n_encoder_layers=2,
        n_decoder_layers=1,
    )
    # encoder layer 4*16 + 2*4*6 = 112, x 2 layers x 4 source tokens = 896
    # cross W^K, W^V 2*16 = 32, x 1 layer x 4 source tokens = 128
    # decoder layer 6*16 + 48 = 144 + projection 10*4 = 40, x 4 target tokens = 736
    dense = 6 * (896 + 128 + 736)
    # pairs: encoder 2 layers x (9 + 1); decoder 1 layer x (self 4 + 4, cross 6 + 2) = 36
    attention = 3 * 2 * 2 * 4 * 36
    assert dense + attention == 12288
    assert training_flops(config, [3, 1], [2, 2]) == 12288
    assert training_flops(config, torch.tensor([3, 1]), torch.tensor([2, 2])) == 12288


@pytest.mark.parametrize("B,S,T", [(1, 1, 1), (3, 7, 5), (64, 128, 128), (2, 10, 31)])
def test_an_unpadded_batch_has_the_closed_form(B, S, T):
    config = ModelConfig()  # the base model, 37000 shared tokens
    D, F, V, N = 512, 2048, 37000, 6
    closed = 6 * B * ((N * (4 * D * D + 2 * D * F) + N * 2 * D * D) * S)
    closed += 6 * B * (N * (6 * D * D + 2 * D * F) + V * D) * T
    closed += 12 * D * N * B * (S * S + T * T + T * S)
    assert training_flops(config, [S] * B, [T] * B) == closed


def test_the_target_vocabulary_and_the_layer_counts_are_each_used():
    base = training_flops(SMALL, [4], [3])
    D, T, S = SMALL.d_model, 3, 4
    bigger_target_vocab = dataclasses.replace(SMALL, tgt_vocab_size=71)
    assert training_flops(bigger_target_vocab, [4], [3]) - base == 6 * D * T
    bigger_source_vocab = dataclasses.replace(SMALL, vocab_size=51)
    assert training_flops(bigger_source_vocab, [4], [3]) == base  # a lookup, not counted
    one_more_encoder = dataclasses.replace(SMALL, n_encoder_layers=4)
    encoder_layer = 6 * (4 * D * D + 2 * D * SMALL.d_ff) * S + 12 * D * S * S
    assert training_flops(one_more_encoder, [4], [3]) - base == encoder_layer


def test_the_length_lists_must_match():
    with pytest.raises(ValueError, match="src_lengths"):
        training_flops(SMALL, [1, 2], [1])


def _counted(config: ModelConfig, src: torch.Tensor, tgt_in: torch.Tensor) -> int:
    """FlopCounterMode's total over a forward and backward pass of a fresh model."""
    torch.manual_seed(0)
    model = Transformer(config)
    with FlopCounterMode(display=False) as counter:
        model(src, tgt_in).sum().backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("S,T", [(7, 5), (3, 9), (6, 6)])
def test_an_independent_counter_agrees_on_an_unpadded_batch(shared, S, T):
    config = SMALL
    if shared:  # one matrix for both embeddings and the output projection
        config = dataclasses.replace(SMALL, share_embeddings=True, tgt_vocab_size=None)
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, config.vocab_size, (2, S), generator=g)  # (B, S)
    tgt_in = torch.randint(4, config.target_vocab_size, (2, T), generator=g)  # (B, T)
    assert training_flops(config, [S, S], [T, T]) == _counted(config, src, tgt_in)


def _padded_batch(sources: list[list[int]], targets: list[list[int]], pad: int) -> Batch:
    """A right-padded Batch as `BatchIterator.collate` makes it (bos 2, eos 3)."""
    S = max(map(len, sources))
    T = max(map(len, targets)) + 1
    src = torch.full((len(sources), S), pad)
    tgt_in, tgt_out = torch.full((len(targets), T), pad), torch.full((len(targets), T), pad)
    for row, (source, target) in enumerate(zip(sources, targets, strict=True)):
        src[row, : len(source)] = torch.tensor(source)
        tgt_in[row, : len(target) + 1] = torch.tensor([2, *target])
        tgt_out[row, : len(target) + 1] = torch.tensor([*target, 3])
    real_src, real_tgt = int(src.ne(pad).sum()), int(tgt_out.ne(pad).sum())
    return Batch(src, tgt_in, tgt_out, real_src, real_tgt, indices=None)


def test_a_padded_batch_counts_its_sentences_without_padding():
    sources = [[5, 6, 7, 8, 9], [5, 6], [7]]
    targets = [[10, 11], [12, 13, 14, 15, 16, 17], [18]]
    batch = _padded_batch(sources, targets, SMALL.pad_id)
    one_by_one = sum(
        _counted(SMALL, torch.tensor([source]), torch.tensor([[2, *target]]))
        for source, target in zip(sources, targets, strict=True)
    )
    assert batch_flops(SMALL, [batch]) == one_by_one
    padded = _counted(SMALL, batch.src, batch.tgt_in)
    assert padded > one_by_one  # the counter also counts the padded positions
    second = _padded_batch([[5, 6]], [[7, 8, 9]], SMALL.pad_id)
    both = batch_flops(SMALL, [batch, second])
    assert both == one_by_one + training_flops(SMALL, [2], [4])


def test_peaks_are_matched_by_exact_model_name():
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == 989.4  # SXM
    assert peak_tflops("NVIDIA H100 PCIe", "bf16") == 756.0
    assert peak_tflops("NVIDIA H100 NVL", "bf16") == 835.5
    assert peak_tflops("NVIDIA H200", "tf32") == 494.7
    assert peak_tflops("NVIDIA GeForce RTX 4090", "fp16") == 165.2  # FP32 accumulation
    assert peak_tflops("  nvidia   a100-sxm4-80gb ", "fp32") == 19.5  # case, spaces
    for name in ("NVIDIA H100", "H100", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "NVIDIA B200", ""):
        assert peak_tflops(name, "bf16") is None
    with pytest.raises(ValueError, match="arithmetic"):
        peak_tflops("NVIDIA H200", "fp8")


def test_every_peak_is_dense_and_ordered():
    """bf16 = fp16 >= tf32 >= fp32 on every model in the table (dense tensor-core rates)."""
    for name, peaks in PEAK_TFLOPS.items():
        assert peaks.bf16 == peaks.fp16 >= peaks.tf32 >= peaks.fp32 > 0, name
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16") < 1000  # 1979 is the sparse figure


def test_float32_products_use_tf32_only_when_torch_allows_it(monkeypatch):
    assert matmul_arithmetic("bf16") == "bf16" and matmul_arithmetic("fp16") == "fp16"
    cuda = torch.backends.cuda
    monkeypatch.setattr(cuda, "matmul", types.SimpleNamespace(fp32_precision="tf32"))
    assert matmul_arithmetic("fp32") == "tf32"
    monkeypatch.setattr(cuda, "matmul", types.SimpleNamespace(fp32_precision="ieee"))
    assert matmul_arithmetic("fp32") == "fp32"
    monkeypatch.setattr(cuda, "matmul", types.SimpleNamespace(allow_tf32=True))  # torch < 2.9
    assert matmul_arithmetic("fp32") == "tf32"


def test_device_peak(monkeypatch):
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert device_peak_flops(cpu, "fp32") is None  # tokens/s only
    assert device_peak_flops(cpu, "fp32", override_tflops=2.5) == 2.5e12
    monkeypatch.setattr(flops.torch.cuda, "get_device_name", lambda device: "NVIDIA H100 PCIe")
    assert device_peak_flops(gpu, "bf16") == 756.0e12
    assert device_peak_flops(gpu, "bf16", override_tflops=700.0) == 700.0e12
    assert device_peak_flops(gpu, "bf16", devices=8) == 8 * 756.0e12  # a job's GPUs together
    assert device_peak_flops(cpu, "fp32", override_tflops=2.5, devices=2) == 5e12
    monkeypatch.setattr(flops, "matmul_arithmetic", lambda precision: "fp32")
    assert device_peak_flops(gpu, "fp32") == pytest.approx(51.2e12)
    monkeypatch.setattr(flops.torch.cuda, "get_device_name", lambda device: "NVIDIA B200")
    assert device_peak_flops(gpu, "bf16") is None
