"""Checkpoint averaging (section 6.1): exact means, tied weights once, clear errors."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.checkpoint import FORMAT_VERSION, load_checkpoint, read_checkpoint, save_checkpoint
from transformer.cli.average import main
from transformer.data.tokenizer import Tokenizer
from transformer.train.average import average_checkpoints

CONFIG = ModelConfig(
    vocab_size=40, d_model=16, d_ff=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1
)


@pytest.fixture(scope="module")
def spm_bytes() -> bytes:
    text = ["a man rides a bike", "ein mann fährt fahrrad", "two dogs play", "zwei hunde"] * 20
    return Tokenizer.train(text, vocab_size=40)


def _write(path, spm: bytes, fill: float, step: int, config: ModelConfig = CONFIG, extra=None):
    model = Transformer(config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.fill_(fill)
    weights = model.state_dict()
    weights.update(extra or {})
    save_checkpoint(
        {
            "format_version": FORMAT_VERSION,
            "model": weights,
            "model_config": dataclasses.asdict(config),
            "config": {},
            "spm_model": spm,
            "tgt_spm_model": None,
            "step": step,
            "optimizer": {"state": {}, "param_groups": []},
        },
        path,
    )
    return path


def test_one_and_three_average_to_exactly_two(tmp_path, spm_bytes):
    counter = {"num_batches_tracked": torch.tensor(5)}
    a = _write(tmp_path / "a.pt", spm_bytes, 1.0, 10, extra=counter)
    b = _write(
        tmp_path / "b.pt", spm_bytes, 3.0, 20, extra={"num_batches_tracked": torch.tensor(9)}
    )
    averaged = average_checkpoints([a, b])
    for key, value in averaged["model"].items():
        if value.is_floating_point():
            assert torch.all(value == 2.0), key
    # Integer buffers/counters are copied from the newest checkpoint, not averaged.
    assert averaged["model"]["num_batches_tracked"].item() == 9
    assert averaged["step"] == 20 and "optimizer" not in averaged


def test_tied_weights_are_averaged_once_and_stay_tied(tmp_path, spm_bytes):
    paths = [_write(tmp_path / f"{i}.pt", spm_bytes, float(i), i) for i in range(1, 4)]
    weights = read_checkpoint(paths[0])["model"]
    tied = [k for k in weights if weights[k].data_ptr() == weights["src_embed.weight"].data_ptr()]
    assert len(tied) >= 2  # the shared embedding appears under several keys
    averaged = average_checkpoints(paths)["model"]
    assert len({averaged[k].data_ptr() for k in tied}) == 1
    assert torch.all(averaged[tied[0]] == 2.0)


def test_result_is_loadable_and_cli_last_n(tmp_path, spm_bytes):
    run = tmp_path / "run"
    run.mkdir()
    for step, fill in ((100, 5.0), (200, 1.0), (300, 3.0)):
        _write(run / f"checkpoint_{step}.pt", spm_bytes, fill, step)
    output = tmp_path / "avg.pt"
    assert main(["--last", "2", "--dir", str(run), "--output", str(output)]) == 0
    model, tokenizer, config = load_checkpoint(output)
    assert torch.all(model.src_embed.weight == 2.0)
    assert config.model == CONFIG and tokenizer.vocab_size == 40
    assert (
        main(
            [
                "--inputs",
                str(run / "checkpoint_100.pt"),
                str(run / "checkpoint_200.pt"),
                "--output",
                str(output),
            ]
        )
        == 0
    )
    assert torch.all(load_checkpoint(output)[0].src_embed.weight == 3.0)


def test_mismatched_checkpoints_name_the_key(tmp_path, spm_bytes, capsys):
    a = _write(tmp_path / "a.pt", spm_bytes, 1.0, 1)
    wider = dataclasses.replace(CONFIG, d_ff=64)
    b = _write(tmp_path / "b.pt", spm_bytes, 1.0, 2, config=wider)
    with pytest.raises(
        ValueError, match=r"weight 'decoder.layers.0.feed_forward.linear1.bias' is \(64,\)"
    ):
        average_checkpoints([a, b])
    c = _write(tmp_path / "c.pt", spm_bytes, 1.0, 3, extra={"extra.buffer": torch.zeros(2)})
    with pytest.raises(ValueError, match="extra.buffer"):
        average_checkpoints([a, c])
    assert main(["--inputs", str(a), str(c), "--output", str(tmp_path / "x.pt")]) == 1
    assert "extra.buffer" in capsys.readouterr().err
    assert main(["--last", "5", "--dir", str(tmp_path), "--output", str(tmp_path / "y.pt")]) == 1


def test_different_vocabulary_or_model_config_names_both_files(tmp_path, spm_bytes):
    a = _write(tmp_path / "a.pt", spm_bytes, 1.0, 1)
    other_spm = Tokenizer.train(["the cat sat on the mat", "die katze"] * 40, vocab_size=40)
    b = _write(tmp_path / "b.pt", other_spm, 1.0, 2)
    with pytest.raises(ValueError, match=r"b\.pt and .*a\.pt have a different SentencePiece"):
        average_checkpoints([a, b])
    state = read_checkpoint(a)
    state["tgt_spm_model"] = other_spm
    save_checkpoint(state, tmp_path / "c.pt")
    with pytest.raises(ValueError, match=r"c\.pt and .*a\.pt have a different target"):
        average_checkpoints([a, tmp_path / "c.pt"])
    dropout = _write(tmp_path / "d.pt", spm_bytes, 1.0, 3, dataclasses.replace(CONFIG, dropout=0.3))
    with pytest.raises(ValueError, match=r"d\.pt and .*a\.pt have a different model config"):
        average_checkpoints([a, dropout])


def test_output_parents_are_created_and_a_directory_is_refused(tmp_path, spm_bytes, capsys):
    a = _write(tmp_path / "a.pt", spm_bytes, 1.0, 1)
    output = tmp_path / "new" / "dir" / "avg.pt"
    assert main(["--inputs", str(a), "--output", str(output)]) == 0
    assert read_checkpoint(output)["step"] == 1
    capsys.readouterr()
    assert main(["--inputs", str(a), "--output", str(tmp_path)]) == 1
    assert f"--output {tmp_path} is a directory" in capsys.readouterr().err


def test_kernel_choices_and_keys_from_older_versions_still_average(tmp_path, spm_bytes):
    """A resumed run may switch kernels; a checkpoint may predate a config field or carry a
    retired one (model_config.linear_kernel, before it became train.linear_kernel)."""
    a = _write(tmp_path / "a.pt", spm_bytes, 1.0, 1)
    kernels = dataclasses.replace(CONFIG, attention_kernel="math")
    b = _write(tmp_path / "b.pt", spm_bytes, 3.0, 2, kernels)
    state = read_checkpoint(b)
    del state["model_config"]["layer_norm_eps"]  # as written before layer_norm_eps existed
    state["model_config"]["linear_kernel"] = "torch"  # as written before it was retired
    save_checkpoint(state, tmp_path / "old.pt")
    averaged = average_checkpoints([a, tmp_path / "old.pt"])
    assert all(torch.all(v == 2.0) for v in averaged["model"].values() if v.is_floating_point())


def test_output_never_replaces_an_input_or_a_training_checkpoint(tmp_path, spm_bytes, capsys):
    a = _write(tmp_path / "checkpoint_1.pt", spm_bytes, 1.0, 1)
    b = _write(tmp_path / "checkpoint_2.pt", spm_bytes, 3.0, 2)
    before = {p: p.read_bytes() for p in (a, b)}
    assert main(["--inputs", str(a), str(b), "--output", str(b)]) == 1
    assert "is also an input of this command" in capsys.readouterr().err
    for name in ("checkpoint_last.pt", "checkpoint_7.pt"):
        assert main(["--inputs", str(a), str(b), "--output", str(tmp_path / name)]) == 2
        assert "a name training writes and resumes from" in capsys.readouterr().err
        assert not (tmp_path / name).exists()
    assert {p: p.read_bytes() for p in (a, b)} == before


def test_tied_copies_that_differ_are_refused_naming_the_file_and_keys(tmp_path, spm_bytes):
    a = _write(tmp_path / "a.pt", spm_bytes, 1.0, 1)
    shape = read_checkpoint(a)["model"]["output_projection.weight"].shape
    edited = {"output_projection.weight": torch.full(shape, 5.0)}  # its own tensor, not 3.0
    b = _write(tmp_path / "b.pt", spm_bytes, 3.0, 2, extra=edited)
    message = r"b\.pt: tied weights 'src_embed.weight' and 'output_projection.weight' differ"
    for paths in ([a, b], [b, a]):  # the first input's key used to win, or the keys untied
        with pytest.raises(ValueError, match=message):
            average_checkpoints(paths)


def test_separate_but_equal_tied_copies_average(tmp_path, spm_bytes):
    a = _write(tmp_path / "a.pt", spm_bytes, 1.0, 1)
    shape = read_checkpoint(a)["model"]["output_projection.weight"].shape
    copy = {"output_projection.weight": torch.full(shape, 3.0)}  # equal values, own storage
    b = _write(tmp_path / "b.pt", spm_bytes, 3.0, 2, extra=copy)
    for paths in ([a, b], [b, a]):
        averaged = average_checkpoints(paths)["model"]
        assert all(torch.all(v == 2.0) for v in averaged.values() if v.is_floating_point())
