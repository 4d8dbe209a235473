"""transformer/cpu/onednn.py: where the swap to oneDNN layers is applied, the trainer and
Translator, never the model or its checkpoints (nor a config's model section)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from transformer.cpu import onednn
from transformer.cpu.onednn import OneDNNLinear, onednn_available, swap_linear_layers

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"


@pytest.mark.slow
def test_trainer_swaps_on_the_cpu_and_checkpoints_do_not_carry_it(
    tmp_path, shared_data, monkeypatch
):
    from transformer.checkpoint import load_checkpoint, read_checkpoint
    from transformer.config import load_config
    from transformer.train.trainer import Trainer

    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    monkeypatch.setattr(onednn, "x86_64", lambda: True)  # "auto" applies on this machine type
    overrides = [
        f"train.output_dir={tmp_path}",
        "train.max_steps=1",
        "train.validate_interval_steps=0",
    ]
    trainer = Trainer(load_config(TINY, overrides))
    linears = [m for m in trainer.model.modules() if isinstance(m, nn.Linear)]
    swapped = onednn_available()
    assert all((type(m) is OneDNNLinear) == swapped for m in linears)
    trainer.train()
    state = read_checkpoint(tmp_path / "checkpoint_last.pt")
    assert "linear_kernel" not in state["model_config"]
    assert state["config"]["train"]["linear_kernel"] == "auto"  # the run's setting, not the model's
    model, _, _ = load_checkpoint(tmp_path / "checkpoint_last.pt")
    assert all(type(m) is nn.Linear for m in model.modules() if isinstance(m, nn.Linear))
    torch_run = Trainer(
        load_config(TINY, [*overrides, "train.linear_kernel=torch", "train.max_steps=2"])
    )
    assert all(type(m) is nn.Linear for m in torch_run.model.modules() if isinstance(m, nn.Linear))


def test_translator_swaps_for_the_call_only(monkeypatch, tiny_model, tiny_tokenizer):
    from transformer.decode.translator import Translator

    monkeypatch.setattr(onednn, "x86_64", lambda: True)
    seen = []
    real_forward = OneDNNLinear.forward

    def spy(self, x):
        seen.append(type(self))
        return real_forward(self, x)

    monkeypatch.setattr(OneDNNLinear, "forward", spy)
    plain = Translator(tiny_model, tiny_tokenizer, linear_kernel="torch")
    expected = plain.translate(["A man is riding a horse."], beam_size=2)
    assert seen == []
    fast = Translator(tiny_model, tiny_tokenizer)  # linear_kernel="auto"
    assert fast.translate(["A man is riding a horse."], beam_size=2) == expected
    assert bool(seen) == onednn_available()
    assert all(type(m) is nn.Linear for m in tiny_model.modules() if isinstance(m, nn.Linear))
    with pytest.raises(ValueError, match="linear kernel .'mkl'. must be one of"):
        Translator(tiny_model, tiny_tokenizer, linear_kernel="mkl")


def test_translator_with_the_torch_kernel_computes_without_onednn_on_a_swapped_model(
    monkeypatch, tiny_model, tiny_tokenizer
):
    from transformer.decode.translator import Translator

    seen = []
    real_forward = OneDNNLinear.forward

    def spy(self, x):
        seen.append(type(self))
        return real_forward(self, x)

    monkeypatch.setattr(OneDNNLinear, "forward", spy)
    expected = Translator(tiny_model, tiny_tokenizer, linear_kernel="torch").translate(
        ["A man is riding a horse."], beam_size=2
    )
    swapped = swap_linear_layers(tiny_model)  # as the trainer leaves its model
    translator = Translator(tiny_model, tiny_tokenizer, linear_kernel="torch")
    assert translator.translate(["A man is riding a horse."], beam_size=2) == expected
    assert seen == []
    assert all(type(m) is OneDNNLinear for m in swapped)  # given back as it was


def test_older_checkpoints_with_a_model_linear_kernel_still_load(
    tmp_path, tiny_model, tiny_tokenizer
):
    import dataclasses

    from transformer.checkpoint import FORMAT_VERSION, load_checkpoint, save_checkpoint

    config = {**dataclasses.asdict(tiny_model.config), "linear_kernel": "onednn"}
    state = {
        "format_version": FORMAT_VERSION,
        "model": tiny_model.state_dict(),
        "model_config": config,
        "config": {"model": config},
        "spm_model": tiny_tokenizer.src_model_bytes,
    }
    save_checkpoint(state, tmp_path / "old.pt")
    model, _, loaded = load_checkpoint(tmp_path / "old.pt")
    assert loaded.model == tiny_model.config
    torch.testing.assert_close(model.state_dict(), tiny_model.state_dict())


def test_a_config_file_with_model_linear_kernel_names_where_it_went(tmp_path):
    from transformer.config import load_config

    path = tmp_path / "old.yaml"
    path.write_text("model:\n  linear_kernel: torch\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"model.linear_kernel is now train.linear_kernel"):
        load_config(path)
