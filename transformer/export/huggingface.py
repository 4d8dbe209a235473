"""Our `Transformer` as a Hugging Face `MarianMTModel` directory, loadable offline.

`MarianMTModel` is the paper's architecture as Marian-NMT trains it: post-norm layers, static
sinusoidal positions, embeddings scaled by sqrt(d_model), a tied output projection. Its config
makes it ours:

- `activation_function="relu"` (equation 2), `scale_embedding=True` (section 3.4),
  `share_encoder_decoder_embeddings` = our `share_embeddings`, `tie_word_embeddings=True`;
- our special ids (pad 0, unk 1, bos 2, eos 3), `decoder_start_token_id` = bos (our decoder
  starts from `<s>`; Marian's own models start from pad), and no `forced_eos_token_id` (we never
  force eos at the length limit);
- `max_position_embeddings` covers our table and `MIN_POSITIONS` source tokens;
- Marian's LayerNorms use eps 1e-5, so other `layer_norm_eps` values are refused.

The weights are reordered along d_model (`transformer.export.huggingface_weights`), because
Marian lays its sinusoids out in two halves. `generation_config.json` holds our greedy
decoding: `<pad>` and `<s>` suppressed (as `transformer.decode.search` does), at most
`max_positions` new tokens. The tokenizer is `tokenizer.json`
(`transformer.export.huggingface_tokenizer`), so that

    model = MarianMTModel.from_pretrained(DIR)
    tokenizer = AutoTokenizer.from_pretrained(DIR)

load without network or sentencepiece.

Source: Hugging Face transformers, `models/marian/` (config fields, layer names).
"""

from __future__ import annotations

from pathlib import Path

import torch

from transformer.export.ctranslate2 import MIN_POSITIONS
from transformer.export.extra import import_extra
from transformer.export.huggingface_tokenizer import fast_tokenizer
from transformer.export.huggingface_weights import halves_permutation, marian_state_dict

MARIAN_LAYER_NORM_EPS = 1e-5


def check_exportable(model: torch.nn.Module, tokenizer) -> None:
    """Refuse what `MarianMTModel` or one fast tokenizer cannot hold.

    Raises:
        ValueError: for a pre-norm model, an odd d_model, a LayerNorm eps other than 1e-5, or
            separate source and target SentencePiece models, naming the setting.
    """
    config = model.config
    if config.norm_first:
        raise ValueError(
            "MarianMTModel is post-norm; this checkpoint is pre-norm (model.norm_first: true): "
            "export it with --to ctranslate2"
        )
    halves_permutation(config.d_model)  # raises for an odd d_model
    if config.layer_norm_eps != MARIAN_LAYER_NORM_EPS:
        raise ValueError(
            f"MarianMTModel's LayerNorms use eps {MARIAN_LAYER_NORM_EPS:g}; this checkpoint has "
            f"model.layer_norm_eps {config.layer_norm_eps:g}"
        )
    if not tokenizer.shared:
        raise ValueError(
            "the Hugging Face export needs one shared SentencePiece model (a fast tokenizer has "
            "one vocabulary); this checkpoint has separate source and target models"
        )


def marian_config(model_config):
    """The `MarianConfig` of our `ModelConfig` (see the module docstring)."""
    transformers = import_extra("transformers")
    c = model_config
    return transformers.MarianConfig(
        vocab_size=c.vocab_size,
        decoder_vocab_size=c.target_vocab_size,
        share_encoder_decoder_embeddings=c.share_embeddings,
        tie_word_embeddings=True,
        d_model=c.d_model,
        encoder_layers=c.n_encoder_layers,
        decoder_layers=c.n_decoder_layers,
        encoder_attention_heads=c.n_heads,
        decoder_attention_heads=c.n_heads,
        encoder_ffn_dim=c.d_ff,
        decoder_ffn_dim=c.d_ff,
        activation_function="relu",
        dropout=c.dropout,
        attention_dropout=c.attention_dropout,
        activation_dropout=c.activation_dropout,
        scale_embedding=True,
        max_position_embeddings=max(c.max_positions + 1, MIN_POSITIONS),
        pad_token_id=c.pad_id,
        bos_token_id=c.bos_id,
        eos_token_id=c.eos_id,
        decoder_start_token_id=c.bos_id,
        forced_eos_token_id=None,
    )


def generation_config(model_config):
    """Greedy decoding as ours: bos first, <pad> and <s> never produced, at most
    `max_positions` new tokens."""
    transformers = import_extra("transformers")
    c = model_config
    return transformers.GenerationConfig(
        decoder_start_token_id=c.bos_id,
        bos_token_id=c.bos_id,
        eos_token_id=c.eos_id,
        pad_token_id=c.pad_id,
        forced_eos_token_id=None,
        suppress_tokens=[c.pad_id, c.bos_id],
        num_beams=1,
        do_sample=False,
        max_new_tokens=c.max_positions,
    )


def marian_model(model: torch.nn.Module):
    """A float32 `MarianMTModel` in eval mode holding `model`'s weights (d_model reordered).

    Raises:
        MissingExtraError: when transformers is not installed.
        ValueError: when the model is not exportable (`check_exportable`'s rules) or a weight
            does not fit Marian's layout (naming the keys).
    """
    transformers = import_extra("transformers")
    marian = transformers.MarianMTModel(marian_config(model.config))
    weights = marian_state_dict(model)
    missing, unexpected = marian.load_state_dict(weights, strict=False)
    # Marian computes its positions; with a shared vocabulary both stacks use model.shared.
    expected = {f"model.{stack}.embed_positions.weight" for stack in ("encoder", "decoder")}
    if model.config.share_embeddings:
        expected |= {f"model.{stack}.embed_tokens.weight" for stack in ("encoder", "decoder")}
    missing = [key for key in missing if key not in expected]
    if missing or unexpected:
        raise ValueError(f"weights do not fit MarianMTModel: missing {missing}, extra {unexpected}")
    marian.generation_config = generation_config(model.config)
    return marian.eval()


def hf_tokenizer(tokenizer, model_config):
    """Our shared SentencePiece model as a `PreTrainedTokenizerFast` (see the module doc)."""
    transformers = import_extra("transformers")
    pieces = tokenizer.source_pieces(
        [model_config.pad_id, model_config.unk_id, model_config.bos_id, model_config.eos_id]
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=fast_tokenizer(tokenizer.src_model_bytes),
        pad_token=pieces[0],
        unk_token=pieces[1],
        bos_token=pieces[2],
        eos_token=pieces[3],
        model_max_length=max(model_config.max_positions, MIN_POSITIONS),
        clean_up_tokenization_spaces=False,
    )


def export_huggingface(model: torch.nn.Module, tokenizer, output_dir: str | Path) -> Path:
    """Write a `MarianMTModel` directory: config, safetensors weights, generation config,
    `tokenizer.json` and its config, and our SentencePiece model (`spm.model`).

    Args:
        model: Our post-norm `Transformer`.
        tokenizer: Its shared `Tokenizer`.
        output_dir: A directory that does not exist or is empty; created.

    Returns:
        `output_dir` as a Path.

    Raises:
        MissingExtraError: when transformers, tokenizers or protobuf is not installed.
        ValueError: for a model `check_exportable` refuses or a non-empty `output_dir`.
    """
    check_exportable(model, tokenizer)
    output_dir = Path(output_dir)
    if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())):
        raise ValueError(f"{output_dir} exists and is not an empty directory")
    marian = marian_model(model)
    fast = hf_tokenizer(tokenizer, model.config)
    output_dir.mkdir(parents=True, exist_ok=True)
    marian.save_pretrained(output_dir)
    fast.save_pretrained(output_dir)
    tokenizer.save(output_dir)
    return output_dir
