"""Tests for transformer/train/average.py: checkpoint averaging (section 6.1).

Every input has all its parameters equal to one constant, so the average has a closed form (the
mean of the constants); tied weights are averaged once and stay tied; mismatches name the key
or both files. The command line on top: tests/cli/test_average.py.
"""

from __future__ import annotations

import pytest
import torch

from transformer.checkpoint import read_checkpoint, save_checkpoint
from transformer.train.average import average_checkpoints, last_checkpoints


def floating(weights: dict) -> list[torch.Tensor]:
    return [value for value in weights.values() if value.is_floating_point()]


def test_one_and_three_average_to_exactly_two(tmp_path, write_filled_checkpoint):
    a = write_filled_checkpoint(
        tmp_path / "a.pt", 1.0, 10, weights={"num_batches_tracked": torch.tensor(5)}
    )
    optimizer = {"state": {}, "param_groups": []}
    b = write_filled_checkpoint(
        tmp_path / "b.pt",
        3.0,
        20,
        weights={"num_batches_tracked": torch.tensor(9)},
        optimizer=optimizer,
    )
    averaged = average_checkpoints([a, b])
    for key, value in averaged["model"].items():
        if value.is_floating_point():
            assert torch.all(value == 2.0), key
    # Integer buffers/counters are copied from the newest checkpoint, not averaged.
    assert averaged["model"]["num_batches_tracked"].item() == 9
    assert averaged["step"] == 20 and "optimizer" not in averaged
    assert averaged["averaged_from"] == [str(a), str(b)]


def test_the_mean_of_many_is_the_mean_of_their_constants(tmp_path, write_filled_checkpoint):
    fills = [0.5, -1.25, 4.0, 2.0, 0.125]
    paths = [write_filled_checkpoint(tmp_path / f"{i}.pt", fill, i) for i, fill in enumerate(fills)]
    averaged = average_checkpoints(paths)["model"]
    mean = sum(fills) / len(fills)
    assert all(torch.all(value == mean) for value in floating(averaged))


def test_tied_weights_are_averaged_once_and_stay_tied(tmp_path, write_filled_checkpoint):
    paths = [write_filled_checkpoint(tmp_path / f"{i}.pt", float(i), i) for i in range(1, 4)]
    weights = read_checkpoint(paths[0])["model"]
    tied = [k for k in weights if weights[k].data_ptr() == weights["src_embed.weight"].data_ptr()]
    assert len(tied) >= 2  # the shared embedding appears under several keys
    averaged = average_checkpoints(paths)["model"]
    assert len({averaged[k].data_ptr() for k in tied}) == 1
    assert torch.all(averaged[tied[0]] == 2.0)


def test_mismatched_checkpoints_name_the_key(tmp_path, write_filled_checkpoint):
    a = write_filled_checkpoint(tmp_path / "a.pt", 1.0, 1)
    b = write_filled_checkpoint(tmp_path / "b.pt", 1.0, 2, model_overrides={"d_ff": 128})
    with pytest.raises(
        ValueError, match=r"weight 'decoder.layers.0.feed_forward.linear1.bias' is \(128,\)"
    ):
        average_checkpoints([a, b])
    c = write_filled_checkpoint(tmp_path / "c.pt", 1.0, 3, weights={"extra.buffer": torch.zeros(2)})
    with pytest.raises(ValueError, match="extra.buffer"):
        average_checkpoints([a, c])


def test_different_vocabulary_or_model_config_names_both_files(
    tmp_path, write_filled_checkpoint, synthetic_tokenizer
):
    a = write_filled_checkpoint(tmp_path / "a.pt", 1.0, 1)
    other_spm = synthetic_tokenizer.src_model_bytes
    b = write_filled_checkpoint(tmp_path / "b.pt", 1.0, 2, spm_model=other_spm)
    with pytest.raises(ValueError, match=r"b\.pt and .*a\.pt have a different SentencePiece"):
        average_checkpoints([a, b])
    state = read_checkpoint(a)
    state["tgt_spm_model"] = other_spm
    save_checkpoint(state, tmp_path / "c.pt")
    with pytest.raises(ValueError, match=r"c\.pt and .*a\.pt have a different target"):
        average_checkpoints([a, tmp_path / "c.pt"])
    eps = write_filled_checkpoint(
        tmp_path / "d.pt", 1.0, 3, model_overrides={"layer_norm_eps": 1e-6}
    )  # the same weights' shapes, another function
    message = r"d\.pt and .*a\.pt have a different model config \(model_config\): "
    with pytest.raises(ValueError, match=message + r"layer_norm_eps 1e-06 against 1e-05;"):
        average_checkpoints([a, eps])


def test_dropouts_act_only_in_training_so_their_checkpoints_average(
    tmp_path, write_filled_checkpoint
):
    """A run resumed with another dropout or word dropout (#17, bad-input pass) was refused."""
    a = write_filled_checkpoint(tmp_path / "a.pt", 1.0, 1)
    changed = {"dropout": 0.3, "src_word_dropout": 0.1, "tgt_word_dropout": 0.2}
    b = write_filled_checkpoint(tmp_path / "b.pt", 3.0, 2, model_overrides=changed)
    averaged = average_checkpoints([a, b])
    assert all(torch.all(v == 2.0) for v in floating(averaged["model"]))
    assert averaged["model_config"]["src_word_dropout"] == 0.1  # the newest input's config


@pytest.mark.parametrize("index", [0, 1])
def test_an_input_whose_config_loading_refuses_is_refused(tmp_path, write_filled_checkpoint, index):
    """A dropout of 'x' in the newest input's stored config was averaged into a checkpoint
    that no command could load (#17, new-user pass); the fields compared across inputs leave
    the dropouts out, so each input's config is checked as loading checks it."""
    paths = [write_filled_checkpoint(tmp_path / f"{n}.pt", 1.0, n + 1) for n in range(2)]
    state = read_checkpoint(paths[index])
    state["model_config"]["dropout"] = "x"
    save_checkpoint(state, paths[index])
    message = rf"^{paths[index]}: invalid model_config: model\.dropout \('x'\) must be a number"
    with pytest.raises(ValueError, match=message):
        average_checkpoints(paths)


def test_kernel_choices_and_keys_from_older_versions_still_average(
    tmp_path, write_filled_checkpoint
):
    """A resumed run may switch kernels; a checkpoint may predate a config field or carry a
    retired one (model_config.linear_kernel, before it became train.linear_kernel)."""
    a = write_filled_checkpoint(tmp_path / "a.pt", 1.0, 1)
    b = write_filled_checkpoint(
        tmp_path / "b.pt", 3.0, 2, model_overrides={"attention_kernel": "math"}
    )
    state = read_checkpoint(b)
    del state["model_config"]["layer_norm_eps"]  # as written before layer_norm_eps existed
    state["model_config"]["linear_kernel"] = "torch"  # as written before it was retired
    save_checkpoint(state, tmp_path / "old.pt")
    averaged = average_checkpoints([a, tmp_path / "old.pt"])
    assert all(torch.all(v == 2.0) for v in floating(averaged["model"]))


def test_tied_copies_that_differ_are_refused_naming_the_file_and_keys(
    tmp_path, write_filled_checkpoint
):
    a = write_filled_checkpoint(tmp_path / "a.pt", 1.0, 1)
    shape = read_checkpoint(a)["model"]["output_projection.weight"].shape
    edited = {"output_projection.weight": torch.full(shape, 5.0)}  # its own tensor, not 3.0
    b = write_filled_checkpoint(tmp_path / "b.pt", 3.0, 2, weights=edited)
    message = r"b\.pt: tied weights 'src_embed.weight' and 'output_projection.weight' differ"
    for paths in ([a, b], [b, a]):  # the first input's key used to win, or the keys untied
        with pytest.raises(ValueError, match=message):
            average_checkpoints(paths)


def test_separate_but_equal_tied_copies_average(tmp_path, write_filled_checkpoint):
    a = write_filled_checkpoint(tmp_path / "a.pt", 1.0, 1)
    shape = read_checkpoint(a)["model"]["output_projection.weight"].shape
    copy = {"output_projection.weight": torch.full(shape, 3.0)}  # equal values, own storage
    b = write_filled_checkpoint(tmp_path / "b.pt", 3.0, 2, weights=copy)
    for paths in ([a, b], [b, a]):
        averaged = average_checkpoints(paths)["model"]
        assert all(torch.all(v == 2.0) for v in floating(averaged))


def test_last_checkpoints_are_the_newest_numbered_ones_oldest_first(
    tmp_path, write_filled_checkpoint
):
    for step in (300, 20, 100, 1000):
        write_filled_checkpoint(tmp_path / f"checkpoint_{step}.pt", 1.0, step)
    for name in ("checkpoint_last.pt", "checkpoint_best.pt", "checkpoint_avg5.pt"):
        write_filled_checkpoint(tmp_path / name, 1.0, 0)
    assert [p.name for p in last_checkpoints(tmp_path, 3)] == [
        "checkpoint_100.pt",
        "checkpoint_300.pt",
        "checkpoint_1000.pt",
    ]
    with pytest.raises(ValueError, match="holds 4 numbered checkpoints .* fewer than --last 5"):
        last_checkpoints(tmp_path, 5)
    with pytest.raises(ValueError, match="no checkpoints to average"):
        average_checkpoints([])
