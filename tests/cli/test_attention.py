"""Heatmaps and the transformer-attention command: one panel per requested head, a real PNG,
raw weights as JSON equal to the Python API's, and clear errors (missing matplotlib, bad layer).

References: the PNG signature and matplotlib's own reader for the image; `attention_weights`
(tested against closed-form facts in test_attention_maps.py) for the JSON.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest
import torch

from tests.evaluate.test_attention_maps import SHORT, SHORT_DE, tiny_model, tiny_tokenizer
from transformer.checkpoint import FORMAT_VERSION, save_checkpoint
from transformer.cli.attention import main
from transformer.decode.config import DecodeConfig
from transformer.evaluate.attention_maps import attention_weights
from transformer.evaluate.plot import draw_attention

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SOURCE = "A man is riding a horse."


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tok):
    return tiny_model(tok.vocab_size)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, model, tok):
    """A checkpoint file in the documented format, written by `save_checkpoint`."""
    path = tmp_path_factory.mktemp("run") / "checkpoint_best.pt"
    state = {
        "format_version": FORMAT_VERSION,
        "model": model.state_dict(),
        "model_config": dataclasses.asdict(model.config),
        "spm_model": tok.src_model_bytes,
        "tgt_spm_model": None,
        "step": 0,
    }
    save_checkpoint(state, path)
    return path


def heatmap_axes(figure) -> list:
    """The panels (axes holding an image), leaving out the colour bar."""
    return [ax for ax in figure.axes if ax.images]


@pytest.mark.parametrize(
    ("heads", "average", "panels"), [(None, False, 4), ([0, 2], False, 2), ([1, 3], True, 1)]
)
def test_one_panel_per_requested_head_and_png_written(model, tok, tmp_path, heads, average, panels):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    maps = attention_weights(model, tok, SOURCE, SHORT_DE, "cross")
    path = tmp_path / "map.png"
    figure = draw_attention(maps, layer=1, heads=heads, average_heads=average, output=path)
    axes = heatmap_axes(figure)
    assert len(axes) == panels
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    assert imread(path).shape[0] > 100
    shown = axes[0].images[0].get_array()
    selected = maps.weights[1, heads if heads is not None else slice(None)]
    expected = selected.mean(0) if average else selected[0]
    torch.testing.assert_close(torch.as_tensor(shown.data), expected, atol=1e-6, rtol=0)
    assert [t.get_text() for t in axes[0].get_xticklabels()] == maps.key_labels
    assert [t.get_text() for t in axes[0].get_yticklabels()] == maps.query_labels


def test_out_of_range_layer_or_head_names_the_value(model, tok):
    pytest.importorskip("matplotlib")
    maps = attention_weights(model, tok, SHORT, kind="self")
    with pytest.raises(ValueError, match="layer 2"):
        draw_attention(maps, layer=2)
    with pytest.raises(ValueError, match=r"\[4\]"):
        draw_attention(maps, heads=[0, 4])


def test_without_matplotlib_says_how_to_install(model, tok, monkeypatch, checkpoint, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    maps = attention_weights(model, tok, SHORT, kind="self")
    with pytest.raises(ImportError, match=r"pip install 'transformer\[viz\]'"):
        draw_attention(maps)
    argv = ["--checkpoint", str(checkpoint), "--src", SHORT, "--output", str(tmp_path / "m.png")]
    assert main(argv) == 1


def test_cli_writes_png_and_json_equal_to_the_python_api(checkpoint, model, tok, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png, raw = tmp_path / "out" / "map.png", tmp_path / "out" / "map.json"
    argv = ["--checkpoint", str(checkpoint), "--src", SOURCE, "--tgt", SHORT_DE]
    argv += ["--kind", "decoder-self", "--layer", "0", "--head", "1", "--head", "3"]
    assert main([*argv, "--output", str(png), "--json", str(raw)]) == 0
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    written = json.loads(raw.read_text(encoding="utf-8"))
    expected = attention_weights(model, tok, SOURCE, SHORT_DE, "decoder-self")
    assert written["query_labels"] == expected.query_labels
    torch.testing.assert_close(torch.tensor(written["weights"]), expected.weights)
    assert f"target: {SHORT_DE}" in capsys.readouterr().out


def test_cli_translates_when_no_target_is_given(checkpoint, model, tok, tmp_path, capsys):
    raw = tmp_path / "map.json"
    argv = ["--checkpoint", str(checkpoint), "--src", SOURCE, "--beam-size", "1"]
    assert main([*argv, "--json", str(raw)]) == 0
    written = json.loads(raw.read_text(encoding="utf-8"))
    translated = attention_weights(model, tok, SOURCE, decode=DecodeConfig(beam_size=1)).target
    assert written["target"] == translated and written["kind"] == "cross"
    assert "(translated)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--kind", "self", "--layer", "2"], "--layer 2"),
        (["--head", "4"], "--head 4"),
    ],
)
def test_cli_rejects_out_of_range_layer_and_head(checkpoint, tmp_path, capsys, extra, message):
    argv = ["--checkpoint", str(checkpoint), "--src", SHORT, "--json", str(tmp_path / "m.json")]
    assert main([*argv, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()


def test_cli_needs_an_output(checkpoint, capsys):
    assert main(["--checkpoint", str(checkpoint), "--src", SHORT]) == 2
    assert "--output" in capsys.readouterr().err


def test_cli_unusable_src_is_one_clean_line(checkpoint, tmp_path, capsys):
    argv = ["--checkpoint", str(checkpoint), "--json", str(tmp_path / "m.json"), "--src", ""]
    assert main(argv) == 1
    error = capsys.readouterr().err
    assert error.startswith("transformer-attention: error: ") and error.count("\n") == 1
    assert not (tmp_path / "m.json").exists()


def test_cli_unknown_device_is_a_usage_error(checkpoint, tmp_path, capsys):
    argv = ["--checkpoint", str(checkpoint), "--json", str(tmp_path / "m.json"), "--src", SHORT]
    assert main([*argv, "--device", "foo"]) == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("transformer-attention: error: --device 'foo' is")
    assert not (tmp_path / "m.json").exists()
