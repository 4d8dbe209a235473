"""Our `Transformer` as a CTranslate2 model: a `TransformerSpec` filled from our weights.

CTranslate2 (OpenNMT's C++ inference engine) describes an encoder-decoder model by a
`ctranslate2.specs.TransformerSpec`: the layer layout (post-norm or pre-norm, ReLU), then one
array per weight. This module fills it from a `Transformer` and its `Tokenizer`:

- embeddings: our (tied) matrices, multiplied by sqrt(d_model) by CTranslate2 too (section 3.4);
  with `share_embeddings` the encoder, decoder and output projection hold the same array, which
  CTranslate2 stores once;
- positions: our own table (`sinusoidal_table`, section 3.5), because CTranslate2's built-in
  sinusoids differ from the paper's (sines and cosines in two halves, another frequency step,
  positions counted from 1). Its rows are the positions 0, 1, ... of our model;
- attention: our q/k/v projections fused into CTranslate2's one [q; k; v] matrix (self-attention)
  or q and [k; v] (cross-attention); scaling by 1 / sqrt(d_k) is CTranslate2's default;
- the output projection gets a bias of `BANNED_LOGIT` at `<pad>` and `<s>`: our searches never
  emit them (`transformer.decode.search`), and with this bias CTranslate2 does not either,
  without an option at translation time;
- vocabularies: the SentencePiece pieces in id order; `<s>` starts the decoder, `</s>` ends it,
  and sources carry neither (`add_source_bos` / `add_source_eos` false), as in our data.

Decoding options that reproduce our searches are in `transformer.export.ctranslate2_translate`.

Source: CTranslate2's `specs/transformer_spec.py` and its converters for the spec's layout
(https://github.com/OpenNMT/CTranslate2); the mapping here is ours.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from transformer.export.extra import import_extra
from transformer.model.positional_encoding import sinusoidal_table

# Added to the logits of <pad> and <s>: exp(-1e4) is 0 in float32, and -1e4 fits float16.
BANNED_LOGIT = -1.0e4
# Rows of the exported position table at least: CTranslate2 reads sources up to 1024 tokens by
# default (`max_input_length`), while our model computes positions beyond its table on the fly.
MIN_POSITIONS = 1024
QUANTIZATIONS = ("int8", "int16", "float16")


def _array(tensor: torch.Tensor) -> np.ndarray:
    """A float32 numpy copy of a weight."""
    return tensor.detach().to("cpu", torch.float32).numpy().copy()


def _set_linear(spec, linear: torch.nn.Linear) -> None:
    spec.weight = _array(linear.weight)
    if linear.bias is not None:
        spec.bias = _array(linear.bias)


def _set_norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma = _array(norm.weight)
    spec.beta = _array(norm.bias)


def _set_fused(spec, linears: list[torch.nn.Linear]) -> None:
    """Several projections of the same input as one: weights (n*D, D), biases (n*D,)."""
    spec.weight = np.concatenate([_array(linear.weight) for linear in linears])  # (n*D, D)
    spec.bias = np.concatenate([_array(linear.bias) for linear in linears])  # (n*D,)


def _set_attention(spec, attention, self_attention: bool) -> None:
    if self_attention:
        _set_fused(spec.linear[0], [attention.q_proj, attention.k_proj, attention.v_proj])
    else:
        _set_linear(spec.linear[0], attention.q_proj)
        _set_fused(spec.linear[1], [attention.k_proj, attention.v_proj])
    _set_linear(spec.linear[-1], attention.out_proj)


def _set_feed_forward(spec, feed_forward) -> None:
    _set_linear(spec.linear_0, feed_forward.linear1)
    _set_linear(spec.linear_1, feed_forward.linear2)


def position_table(d_model: int, max_positions: int) -> np.ndarray:
    """Our sinusoids for positions 0 .. rows - 1, rows = max(max_positions, `MIN_POSITIONS`).

    Returns:
        float32 array of shape (rows, d_model): row p is position p (section 3.5).
    """
    rows = max(max_positions, MIN_POSITIONS)
    return sinusoidal_table(torch.arange(rows), d_model).numpy()


def build_spec(model: torch.nn.Module, tokenizer):
    """A CTranslate2 `TransformerSpec` holding `model`'s weights and `tokenizer`'s vocabularies.

    Args:
        model: Our `Transformer` (any device and dtype; copied to float32 numpy).
        tokenizer: Its `Tokenizer` (shared or separate SentencePiece models).

    Returns:
        The filled spec (not yet validated, quantized or saved; see `export_ctranslate2`).

    Raises:
        MissingExtraError: when ctranslate2 is not installed.
        ValueError: when the tokenizer's vocabulary sizes differ from the model's.
    """
    ctranslate2 = import_extra("ctranslate2")
    specs = ctranslate2.specs
    config = model.config
    if (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size) != (
        config.vocab_size,
        config.target_vocab_size,
    ):
        raise ValueError(
            f"tokenizer vocabularies ({tokenizer.src_vocab_size}, {tokenizer.tgt_vocab_size}) "
            f"differ from the model's ({config.vocab_size}, {config.target_vocab_size})"
        )
    spec = specs.TransformerSpec.from_config(
        (config.n_encoder_layers, config.n_decoder_layers),
        config.n_heads,
        pre_norm=config.norm_first,
        activation=specs.Activation.RELU,
    )
    positions = position_table(config.d_model, config.max_positions)
    encoder, decoder = spec.encoder, spec.decoder
    encoder.embeddings[0].weight = _array(model.src_embed.weight)
    decoder.embeddings.weight = _array(model.tgt_embed.weight)
    encoder.scale_embeddings = decoder.scale_embeddings = True  # x sqrt(d_model), section 3.4
    encoder.position_encodings.encodings = positions
    decoder.position_encodings.encodings = positions
    for layer_spec, layer in zip(encoder.layer, model.encoder.layers, strict=True):
        _set_attention(layer_spec.self_attention, layer.self_attn, self_attention=True)
        _set_norm(layer_spec.self_attention.layer_norm, layer.norm1)
        _set_feed_forward(layer_spec.ffn, layer.feed_forward)
        _set_norm(layer_spec.ffn.layer_norm, layer.norm2)
    for layer_spec, layer in zip(decoder.layer, model.decoder.layers, strict=True):
        _set_attention(layer_spec.self_attention, layer.self_attn, self_attention=True)
        _set_norm(layer_spec.self_attention.layer_norm, layer.norm1)
        _set_attention(layer_spec.attention, layer.cross_attn, self_attention=False)
        _set_norm(layer_spec.attention.layer_norm, layer.norm2)
        _set_feed_forward(layer_spec.ffn, layer.feed_forward)
        _set_norm(layer_spec.ffn.layer_norm, layer.norm3)
    if config.norm_first:  # the final LayerNorm of each pre-norm stack
        _set_norm(encoder.layer_norm, model.encoder.norm)
        _set_norm(decoder.layer_norm, model.decoder.norm)
    decoder.projection.weight = _array(model.output_projection.weight)
    bias = np.zeros(config.target_vocab_size, dtype=np.float32)
    bias[[config.pad_id, config.bos_id]] = BANNED_LOGIT
    decoder.projection.bias = bias

    spec.register_source_vocabulary(tokenizer.source_pieces(range(config.vocab_size)))
    spec.register_target_vocabulary(tokenizer.target_pieces(range(config.target_vocab_size)))
    pieces = tokenizer.target_pieces([config.unk_id, config.bos_id, config.eos_id])
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = pieces
    spec.config.decoder_start_token = pieces[1]  # the decoder starts from <s>, as ours
    spec.config.add_source_bos = False
    spec.config.add_source_eos = False  # our sources carry no eos
    spec.config.layer_norm_epsilon = config.layer_norm_eps
    return spec


def export_ctranslate2(
    model: torch.nn.Module, tokenizer, output_dir: str | Path, quantization: str | None = None
) -> Path:
    """Write a CTranslate2 model directory: `model.bin`, `config.json`, the vocabularies, and
    the SentencePiece model(s) (`spm.model`, or `spm.src.model` + `spm.tgt.model`).

    Args:
        model: Our `Transformer`.
        tokenizer: Its `Tokenizer`.
        output_dir: A directory that does not exist or is empty; created.
        quantization: None (float32 weights) or one of `QUANTIZATIONS`.

    Returns:
        `output_dir` as a Path.

    Raises:
        MissingExtraError: when ctranslate2 is not installed.
        ValueError: for an unknown quantization, a non-empty `output_dir`, or a spec that
            CTranslate2 refuses (its message).
    """
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(
            f"quantization ({quantization!r}) must be one of {', '.join(QUANTIZATIONS)}"
        )
    output_dir = Path(output_dir)
    if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())):
        raise ValueError(f"{output_dir} exists and is not an empty directory")
    spec = build_spec(model, tokenizer)
    spec.validate()
    spec.optimize(quantization=quantization)
    output_dir.mkdir(parents=True, exist_ok=True)
    spec.save(str(output_dir))
    tokenizer.save(output_dir)
    return output_dir
