"""Checkpoints: what a read checks inside the file. Every entry has its documented type, the
model config is one this version knows, each weight is a tensor, and tied weights stored as
separate copies agree (NaN in the same places included); else a one-line error names the file.
"""

from __future__ import annotations

import re

import pytest
import torch

from transformer.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint
from transformer.train.average import average_checkpoints


@pytest.fixture
def model(make_model, tiny_tokenizer):
    """A small model in training mode (as training saves it)."""
    return make_model(tiny_tokenizer.vocab_size).train()


@pytest.mark.parametrize(
    "stored, message",
    [
        ({"vocab_size": 40, "colour": "red"}, r"keys this version does not know: \['colour'\]"),
        ({"vocab_size": 40, "d_model": 0}, r"invalid model_config: model\.d_model \(0\)"),
        ({"vocab_size": 40, "attention_kernel": "bogus"}, "invalid model_config: model.attention"),
        (None, "'model_config' must be a mapping, not NoneType"),
    ],
)
def test_bad_model_config_names_the_file(
    tmp_path, model, tiny_tokenizer, checkpoint_state, stored, message
):
    path = tmp_path / "bad.pt"
    torch.save({**checkpoint_state(model, tiny_tokenizer, 7), "model_config": stored}, path)
    with pytest.raises(ValueError, match=rf"^{path}: .*{message}"):
        load_checkpoint(path)


def _separate_copies(state_dict: dict) -> dict:
    """The weights as another tool may write them: every key its own tensor (no shared storage)."""
    return {key: value.clone() for key, value in state_dict.items()}


TIED_COPIES_THAT_DIFFER = [
    (True, "tgt_embed.weight", "'src_embed.weight' and 'tgt_embed.weight'"),
    (True, "output_projection.weight", "'src_embed.weight' and 'output_projection.weight'"),
    (False, "output_projection.weight", "'tgt_embed.weight' and 'output_projection.weight'"),
]


@pytest.mark.parametrize("share, changed, keys", TIED_COPIES_THAT_DIFFER)
def test_tied_copies_that_differ_are_refused_naming_the_file_and_keys(
    tmp_path, make_model, tiny_tokenizer, checkpoint_state, share, changed, keys
):
    model = make_model(tiny_tokenizer.vocab_size, share_embeddings=share)
    weights = _separate_copies(model.state_dict())
    weights[changed][5, 3] += 1.0
    path = tmp_path / "edited.pt"
    save_checkpoint({**checkpoint_state(model, tiny_tokenizer, 7), "model": weights}, path)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: tied weights {keys} differ"):
        load_checkpoint(path)


@pytest.mark.parametrize("share", [True, False])
def test_separate_but_equal_tied_copies_load_and_stay_tied(
    tmp_path, make_model, tiny_tokenizer, checkpoint_state, share
):
    model = make_model(tiny_tokenizer.vocab_size, share_embeddings=share)
    weights = _separate_copies(model.state_dict())
    if not share:  # the source embedding is not tied to anything: it may hold anything
        weights["src_embed.weight"] += 1.0
    path = tmp_path / "copies.pt"
    save_checkpoint({**checkpoint_state(model, tiny_tokenizer, 7), "model": weights}, path)
    loaded, _, _ = load_checkpoint(path)
    for key, value in weights.items():
        assert torch.equal(loaded.state_dict()[key], value), key
    assert loaded.tgt_embed.weight.data_ptr() == loaded.output_projection.weight.data_ptr()


MALFORMED_ENTRIES = [
    (dict(config=[1, 2]), r"'config' must be a mapping or null, not list"),
    (dict(model=[1, 2]), r"'model' must be a mapping of weight names to tensors, not list"),
    (dict(model=None), r"'model' must be a mapping of weight names to tensors, not NoneType"),
    (dict(model_config=[40]), r"'model_config' must be a mapping, not list"),
    (dict(spm_model="text"), r"'spm_model' must be bytes \(a SentencePiece model\), not str"),
    (dict(spm_model=None), r"'spm_model' must be bytes \(a SentencePiece model\), not NoneType"),
    (dict(tgt_spm_model=7), r"'tgt_spm_model' must be bytes \(a SentencePiece model\) or null"),
    (dict(format_version=torch.ones(2)), r"checkpoint format_version Tensor is not supported"),
]


@pytest.mark.parametrize("entries, message", MALFORMED_ENTRIES)
def test_entries_of_the_wrong_type_are_one_line_errors_naming_the_file(
    tmp_path, model, tiny_tokenizer, checkpoint_state, entries, message
):
    path = tmp_path / "malformed.pt"
    torch.save({**checkpoint_state(model, tiny_tokenizer, 7), **entries}, path)
    for read in (read_checkpoint, load_checkpoint):  # loading, resuming and averaging read it
        with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: {message}") as error:
            read(path)
        assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "weight, kind", [([1.0, 2.0], "list"), (3.0, "float"), ("w", "str"), (None, "NoneType")]
)
def test_a_weight_that_is_not_a_tensor_is_refused_naming_it(
    tmp_path, model, tiny_tokenizer, checkpoint_state, weight, kind
):
    path = tmp_path / "odd.pt"
    weights = {**model.state_dict(), "encoder.norm.weight": weight}
    torch.save({**checkpoint_state(model, tiny_tokenizer, 7), "model": weights}, path)
    message = rf"^{re.escape(str(path))}: weight 'encoder.norm.weight' of 'model' is a {kind}, "
    for read in (load_checkpoint, lambda path: average_checkpoints([path, path])):
        with pytest.raises(ValueError, match=message + "not a tensor$"):
            read(path)


@pytest.mark.parametrize("copies", ["shared", "separate"])
def test_a_tied_matrix_holding_nan_loads_when_its_copies_agree(
    tmp_path, model, tiny_tokenizer, checkpoint_state, copies
):
    with torch.no_grad():
        model.src_embed.weight[5, 3] = float("nan")  # e.g. a run that diverged
    weights = model.state_dict() if copies == "shared" else _separate_copies(model.state_dict())
    path = tmp_path / "nan.pt"
    save_checkpoint({**checkpoint_state(model, tiny_tokenizer, 7), "model": weights}, path)
    loaded, _, _ = load_checkpoint(path)
    torch.testing.assert_close(loaded.src_embed.weight, model.src_embed.weight, equal_nan=True)
    assert loaded.src_embed.weight.data_ptr() == loaded.output_projection.weight.data_ptr()


def test_tied_copies_with_nan_at_different_places_are_refused(
    tmp_path, model, tiny_tokenizer, checkpoint_state
):
    weights = _separate_copies(model.state_dict())
    weights["src_embed.weight"][5, 3] = float("nan")
    weights["tgt_embed.weight"][5, 4] = float("nan")
    path = tmp_path / "nan.pt"
    save_checkpoint({**checkpoint_state(model, tiny_tokenizer, 7), "model": weights}, path)
    with pytest.raises(ValueError, match=r": tied weights 'src_embed.weight' and 'tgt_embed"):
        load_checkpoint(path)
