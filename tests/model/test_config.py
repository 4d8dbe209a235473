"""Tests for transformer/model/config.py: `ModelConfig` rejects out-of-range values by name."""

from __future__ import annotations

import pytest

from transformer.config import config_from_dict
from transformer.model.config import ModelConfig


def test_defaults_are_the_base_model_of_table_3():
    config = ModelConfig()
    sizes = (config.d_model, config.d_ff, config.n_heads, config.n_encoder_layers)
    assert sizes == (512, 2048, 8, 6) and config.n_decoder_layers == 6
    assert config.dropout == 0.1 and not config.norm_first and config.share_embeddings


def test_target_vocabulary_is_the_source_one_unless_separate():
    assert ModelConfig(vocab_size=100).target_vocab_size == 100
    separate = ModelConfig(vocab_size=100, tgt_vocab_size=70, share_embeddings=False)
    assert separate.target_vocab_size == 70


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d_model=500), r"^model\.d_model \(500\) must be divisible by model\.n_heads \(8\)$"),
        (dict(dropout=1.5), r"^model\.dropout \(1.5\) must be in \[0, 1\)$"),
        (dict(n_encoder_layers=0), r"^model\.n_encoder_layers \(0\) must be at least 1$"),
        (dict(pad_id=1), "distinct"),
        (dict(attention_kernel="flash"), "attention_kernel"),
        (dict(tgt_vocab_size=50), "share_embeddings"),
    ],
)
def test_invalid_config_names_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**kwargs)


@pytest.mark.parametrize("kwargs", [dict(d_model=16.0), dict(n_heads=True), dict(d_ff="2048")])
def test_model_sizes_must_be_integers(kwargs):
    (name,) = kwargs
    with pytest.raises(ValueError, match=rf"^model\.{name} .* must be an integer$"):
        ModelConfig(**kwargs)


@pytest.mark.parametrize("override", ["model.layer_norm_eps=-1", "model.layer_norm_eps=.nan"])
def test_out_of_range_layer_norm_eps_in_a_config_names_the_key(override):
    with pytest.raises(ValueError, match="layer_norm_eps"):
        config_from_dict({}, [override])


@pytest.mark.parametrize(
    "kwargs, named",
    [
        (dict(tgt_vocab_size=800), r"vocab_size \(37000, the default\)"),
        (dict(vocab_size=900, tgt_vocab_size=800), r"vocab_size \(900\) but"),
    ],
)
def test_a_target_size_with_shared_embeddings_says_whether_vocab_size_is_the_default(kwargs, named):
    # A config that leaves vocab_size to training (configs/multi30k.yaml) and sets only
    # tgt_vocab_size should not read as if the user had chosen 37000.
    with pytest.raises(ValueError, match=named):
        ModelConfig(**kwargs)


def test_special_ids_must_fit_the_smaller_vocabulary():
    with pytest.raises(ValueError, match=r"eos_id \(3\) must be below model\.tgt_vocab_size \(3\)"):
        ModelConfig(vocab_size=100, tgt_vocab_size=3, share_embeddings=False)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(pad_id=0.0), r"^model\.pad_id \(0\.0\) must be an integer$"),
        (dict(bos_id="2"), r"^model\.bos_id \('2'\) must be an integer$"),
        (dict(tgt_vocab_size=100.5), r"^model\.tgt_vocab_size \(100\.5\) must be an integer$"),
        (dict(tgt_vocab_size=True), r"^model\.tgt_vocab_size \(True\) must be an integer$"),
        (dict(norm_first="no"), r"^model\.norm_first \('no'\) must be true or false$"),
        (dict(share_embeddings="false"), r"^model\.share_embeddings \('false'\) must be true or"),
        (dict(layer_norm_eps="abc"), r"^model\.layer_norm_eps \('abc'\) must be a finite number"),
    ],
)
def test_a_stored_config_of_the_wrong_type_is_named(kwargs, message):
    """A checkpoint's stored config is not read through the YAML loader: pad_id 0.0 gave an
    IndexError traceback in the embedding, "false" read as true, "abc" as "must be real number,
    not str" (#17, bad-input pass)."""
    with pytest.raises(ValueError, match=message):
        ModelConfig(**kwargs)


def test_a_special_id_out_of_range_names_the_bound():
    """ "pad_id (-1) must be in [0, 37000)" named the class default, not the config's size."""
    with pytest.raises(ValueError, match=r"^model\.pad_id \(-1\) must be at least 0$"):
        ModelConfig(vocab_size=100, pad_id=-1)
    separate = dict(vocab_size=200, tgt_vocab_size=100, share_embeddings=False)
    with pytest.raises(ValueError, match=r"^model\.eos_id \(150\) must be below model\.tgt_voc"):
        ModelConfig(**separate, eos_id=150)
    assert ModelConfig(**separate, eos_id=99).eos_id == 99
