"""Model FLOPs of a training step, and the GPUs' peak FLOP/s: the two halves of MFU.

MFU (model FLOPs utilisation, Chowdhery et al., 2022, "PaLM", appendix B) = the FLOPs the
model needs per second of training / the hardware's peak FLOP/s. The FLOPs are those of the
model, not of the kernels that run it: recomputation, padding and causal-mask savings are not
counted. Our convention, for one training step (forward + backward = 3 x forward, since each
matrix product's backward pass costs two products, Kaplan et al., 2020, section 2.1):

- 6 x (matmul weights x the tokens they process): every encoder layer (W^Q, W^K, W^V, W^O
  and the two feed-forward matrices, 4 D^2 + 2 D F) over the real source tokens; every
  decoder layer's self-attention, cross-attention W^Q and W^O and feed-forward matrices
  (6 D^2 + 2 D F) over the real target tokens, and its cross-attention W^K and W^V (2 D^2)
  over the source tokens (they project the encoder output); the output projection
  (V_tgt x D) over the target tokens;
- attention: Q K^T and (weights x V) cost 2 x D FLOPs each per query-key pair per layer
  forward, so 3 x 2 x 2 x D per pair per step, summed per sentence over the encoder's s^2,
  the decoder self-attention's t^2 (counted in full: the causal mask skips no work by this
  convention) and the cross-attention's t x s pairs;
- not counted: embedding lookups, positional encodings, LayerNorm, softmax, dropout, biases,
  the loss and the optimizer.

s and t are a sentence's real source and target tokens (target = words + eos, the length of
`tgt_out`), so padding is not counted: a padded batch counts what an unpadded one would.

Peaks are the vendors' dense (no 2:4 sparsity) tensor-core figures per exact GPU model and
per arithmetic: bf16 and fp16 autocast run their matrix products in bf16 / fp16; float32
training runs them in TF32 when PyTorch allows it (`torch.backends.cuda.matmul`), else on the
plain float32 units. A GPU missing from the table (or a MIG slice, whose name differs) gets no
peak, so its logs show tokens/s without MFU; `train.peak_tflops` / `--peak-tflops` set one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from transformer.data.batching import Batch
from transformer.model.config import ModelConfig


def training_flops(
    model: ModelConfig,
    src_lengths: Sequence[int] | torch.Tensor,
    tgt_lengths: Sequence[int] | torch.Tensor,
) -> int:
    """FLOPs of one training step (forward + backward) on these sentences, by the module doc.

    A batch of B sentences without padding is `[S] * B, [T] * B`.

    Args:
        model: Sizes D, F, heads, encoder and decoder layer counts, target vocabulary.
        src_lengths: Real source tokens s_i of each sentence.
        tgt_lengths: Real target tokens t_i of each sentence (words + eos: `tgt_out`).

    Returns:
        6 x (weights x tokens) + 12 D x (per-layer query-key pairs), exactly (an int).

    Raises:
        ValueError: when the two length lists differ in size.
    """
    s = torch.as_tensor(src_lengths, dtype=torch.int64).reshape(-1)
    t = torch.as_tensor(tgt_lengths, dtype=torch.int64).reshape(-1)
    if s.numel() != t.numel():
        raise ValueError(
            f"src_lengths ({s.numel()} sentences) and tgt_lengths ({t.numel()}) must match"
        )
    src_tokens, tgt_tokens = int(s.sum()), int(t.sum())
    src_pairs, tgt_pairs, cross_pairs = int((s * s).sum()), int((t * t).sum()), int((t * s).sum())
    D, F, V = model.d_model, model.d_ff, model.target_vocab_size
    n_enc, n_dec = model.n_encoder_layers, model.n_decoder_layers
    encoder_layer = 4 * D * D + 2 * D * F  # W^Q, W^K, W^V, W^O and the two FFN matrices
    decoder_layer = 6 * D * D + 2 * D * F  # self W^Q..W^O, cross W^Q and W^O, FFN
    cross_kv = 2 * D * D  # cross-attention W^K, W^V: applied to the encoder output
    weights_x_tokens = (
        n_enc * encoder_layer * src_tokens
        + n_dec * cross_kv * src_tokens
        + (n_dec * decoder_layer + V * D) * tgt_tokens
    )
    pairs = n_enc * src_pairs + n_dec * (tgt_pairs + cross_pairs)
    return 6 * weights_x_tokens + 3 * 2 * 2 * D * pairs


def batch_flops(model: ModelConfig, batches: Sequence[Batch]) -> int:
    """`training_flops` of these micro-batches, the sentence lengths read from their padding.

    Call it on host batches (before `Batch.to(device)`): on GPU tensors it would wait for the
    device.

    Args:
        model: The model's config (its `pad_id` marks the padding).
        batches: Micro-batches of one update on this process.

    Returns:
        The summed FLOPs.
    """
    total = 0
    for batch in batches:
        src_lengths = batch.src.ne(model.pad_id).sum(dim=1)  # (B,)
        tgt_lengths = batch.tgt_out.ne(model.pad_id).sum(dim=1)  # (B,)
        total += training_flops(model, src_lengths, tgt_lengths)
    return total


class PeakTFLOPS(NamedTuple):
    """Dense peak TFLOP/s of one GPU model (tensor cores; `fp32` is the plain float32 units)."""

    bf16: float
    fp16: float
    tf32: float
    fp32: float


# Keyed by `torch.cuda.get_device_name()`; dense = the data sheets' "with sparsity" figures / 2.
# A100 (all four boards): NVIDIA A100 Tensor Core GPU data sheet. H100 SXM ("80GB HBM3") and
# PCIe: NVIDIA H100 Tensor Core GPU Architecture white paper (dense figures); H100 NVL: H100
# data sheet. H200 and H200 NVL: NVIDIA H200 data sheet. L4, L40S: their data sheets.
# RTX 4090: NVIDIA Ada GPU Architecture white paper, appendix; GeForce cards halve the tensor
# rate with FP32 accumulation, which PyTorch's bf16/fp16 matmuls use, so bf16 and fp16 are the
# "with FP32 accumulate" figures (165.2, not the 330.3 of FP16 accumulation).
PEAK_TFLOPS: dict[str, PeakTFLOPS] = {
    "NVIDIA A100-SXM4-40GB": PeakTFLOPS(bf16=312.0, fp16=312.0, tf32=156.0, fp32=19.5),
    "NVIDIA A100-SXM4-80GB": PeakTFLOPS(bf16=312.0, fp16=312.0, tf32=156.0, fp32=19.5),
    "NVIDIA A100-PCIE-40GB": PeakTFLOPS(bf16=312.0, fp16=312.0, tf32=156.0, fp32=19.5),
    "NVIDIA A100 80GB PCIe": PeakTFLOPS(bf16=312.0, fp16=312.0, tf32=156.0, fp32=19.5),
    "NVIDIA H100 80GB HBM3": PeakTFLOPS(bf16=989.4, fp16=989.4, tf32=494.7, fp32=66.9),
    "NVIDIA H100 PCIe": PeakTFLOPS(bf16=756.0, fp16=756.0, tf32=378.0, fp32=51.2),
    "NVIDIA H100 NVL": PeakTFLOPS(bf16=835.5, fp16=835.5, tf32=417.5, fp32=60.0),
    "NVIDIA H200": PeakTFLOPS(bf16=989.4, fp16=989.4, tf32=494.7, fp32=66.9),
    "NVIDIA H200 NVL": PeakTFLOPS(bf16=835.5, fp16=835.5, tf32=417.5, fp32=60.0),
    "NVIDIA L4": PeakTFLOPS(bf16=121.0, fp16=121.0, tf32=60.0, fp32=30.3),
    "NVIDIA L40S": PeakTFLOPS(bf16=362.05, fp16=362.05, tf32=183.0, fp32=91.6),
    "NVIDIA GeForce RTX 4090": PeakTFLOPS(bf16=165.2, fp16=165.2, tf32=82.6, fp32=82.6),
}

ARITHMETICS = PeakTFLOPS._fields


def _normalise(name: str) -> str:
    return " ".join(name.split()).casefold()


_BY_NAME = {_normalise(name): peaks for name, peaks in PEAK_TFLOPS.items()}


def peak_tflops(device_name: str, arithmetic: str) -> float | None:
    """The table's dense peak of a GPU model, matched by its exact name.

    Args:
        device_name: `torch.cuda.get_device_name()` (case and runs of spaces are ignored; no
            substring match, so an H100 PCIe never gets the SXM figure).
        arithmetic: "bf16", "fp16", "tf32" or "fp32".

    Returns:
        TFLOP/s, or None for a GPU missing from the table.

    Raises:
        ValueError: for an unknown arithmetic.
    """
    if arithmetic not in ARITHMETICS:
        raise ValueError(f"arithmetic ({arithmetic!r}) must be one of {', '.join(ARITHMETICS)}")
    peaks = _BY_NAME.get(_normalise(device_name))
    return None if peaks is None else getattr(peaks, arithmetic)


def matmul_arithmetic(precision: str) -> str:
    """The arithmetic of a CUDA run's matrix products at a resolved `train.precision`.

    Args:
        precision: "bf16", "fp16" (autocast) or "fp32".

    Returns:
        "bf16", "fp16", or for fp32 "tf32" when PyTorch lets cuBLAS use TF32, else "fp32".
    """
    if precision != "fp32":
        return precision
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # torch >= 2.9 (reading allow_tf32 may then raise)
        return "tf32" if matmul.fp32_precision == "tf32" else "fp32"
    return "tf32" if matmul.allow_tf32 else "fp32"


def device_peak_flops(
    device: torch.device, precision: str, override_tflops: float | None = None, devices: int = 1
) -> float | None:
    """Peak FLOP/s of a job's training devices (all of the same model), for MFU.

    Args:
        device: This process's training device.
        precision: The resolved `train.precision`.
        override_tflops: `train.peak_tflops`, per device; when given it is used on any device.
        devices: How many such devices the job trains on (its processes).

    Returns:
        FLOP/s (not TFLOP/s) of all `devices` together, or None: a CPU or other non-CUDA
        device, or a GPU missing from `PEAK_TFLOPS`, without an override.
    """
    if override_tflops is not None:
        return override_tflops * 1e12 * devices
    if device.type != "cuda":
        return None
    tflops = peak_tflops(torch.cuda.get_device_name(device), matmul_arithmetic(precision))
    return None if tflops is None else tflops * 1e12 * devices
