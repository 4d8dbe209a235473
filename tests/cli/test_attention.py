"""Tests for transformer/cli/attention.py (the transformer-attention command): a real PNG, raw
weights as JSON equal to the Python API's, and clear errors (missing matplotlib, bad layer).

References: the PNG signature for the image (the panels themselves: tests/evaluate/test_plot.py);
`attention_weights` (tested against closed-form facts in test_attention_maps.py) for the JSON.
"""

from __future__ import annotations

import json
import sys

import pytest
import torch

from transformer.cli.attention import main
from transformer.decode.config import DecodeConfig
from transformer.evaluate.attention_maps import attention_weights

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SOURCE = "A man is riding a horse."
SHORT, SHORT_DE = "A man.", "Ein Mann."


@pytest.fixture(scope="module")
def model(make_model, tiny_tokenizer):
    return make_model(tiny_tokenizer.vocab_size)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, model, tiny_tokenizer, write_checkpoint):
    """A checkpoint file in the documented format, written by `save_checkpoint`."""
    path = tmp_path_factory.mktemp("run") / "checkpoint_best.pt"
    return write_checkpoint(path, model, tiny_tokenizer)


def test_without_matplotlib_says_how_to_install(monkeypatch, checkpoint, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    argv = ["--checkpoint", str(checkpoint), "--src", SHORT, "--output", str(tmp_path / "m.png")]
    assert main(argv) == 1
    error = capsys.readouterr().err
    assert error.startswith("transformer-attention: error: ") and "pip install matplotlib" in error
    assert not (tmp_path / "m.png").exists()


def test_cli_writes_png_and_json_equal_to_the_python_api(
    checkpoint, model, tiny_tokenizer, tmp_path, capsys
):
    pytest.importorskip("matplotlib")
    png, raw = tmp_path / "map.png", tmp_path / "map.json"
    argv = ["--checkpoint", str(checkpoint), "--src", SOURCE, "--tgt", SHORT_DE]
    argv += ["--kind", "decoder-self", "--layer", "0", "--head", "1", "--head", "3"]
    assert main([*argv, "--output", str(png), "--json", str(raw)]) == 0
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    written = json.loads(raw.read_text(encoding="utf-8"))
    expected = attention_weights(model, tiny_tokenizer, SOURCE, SHORT_DE, "decoder-self")
    assert written["query_labels"] == expected.query_labels
    torch.testing.assert_close(torch.tensor(written["weights"]), expected.weights)
    assert f"target: {SHORT_DE}" in capsys.readouterr().out


def test_cli_translates_when_no_target_is_given(
    checkpoint, model, tiny_tokenizer, tmp_path, capsys
):
    raw = tmp_path / "map.json"
    argv = ["--checkpoint", str(checkpoint), "--src", SOURCE, "--beam-size", "1"]
    assert main([*argv, "--json", str(raw)]) == 0
    written = json.loads(raw.read_text(encoding="utf-8"))
    translated = attention_weights(
        model, tiny_tokenizer, SOURCE, decode=DecodeConfig(beam_size=1)
    ).target
    assert written["target"] == translated and written["kind"] == "cross"
    assert "(translated)" in capsys.readouterr().out


@pytest.mark.parametrize("option", ["--layer", "--head"])
def test_cli_rejects_out_of_range_layer_and_head_naming_the_range(
    checkpoint, model, tmp_path, capsys, option
):
    """One past the model's last layer (head) is refused, and the message gives the range."""
    n = model.config.n_encoder_layers if option == "--layer" else model.config.n_heads
    argv = ["--checkpoint", str(checkpoint), "--src", SHORT, "--json", str(tmp_path / "m.json")]
    assert main([*argv, "--kind", "self", option, str(n)]) == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert f"{option} {n} is out of range" in error and f"(0 to {n - 1}" in error
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


@pytest.mark.parametrize("option", ["--src", "--tgt"])
def test_a_sentence_that_is_not_utf8_is_a_usage_error_naming_the_option(
    option, checkpoint, tmp_path, capsys
):
    """Bytes that are not UTF-8 reach Python's argv as surrogate escapes (PEP 383), here
    made by decoding them as the interpreter decodes the command line."""
    text = b"caf\xe9".decode("utf-8", "surrogateescape")
    argv = ["--checkpoint", str(checkpoint), "--json", str(tmp_path / "m.json"), "--src", SHORT]
    assert main([*argv, option, text]) == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error == (
        f"transformer-attention: error: argument {option}: not valid UTF-8 (byte 0xe9 at "
        "character 4); give the sentence in UTF-8"
    )
    assert not (tmp_path / "m.json").exists()


def test_cli_unknown_device_is_a_usage_error(checkpoint, tmp_path, capsys):
    argv = ["--checkpoint", str(checkpoint), "--json", str(tmp_path / "m.json"), "--src", SHORT]
    assert main([*argv, "--device", "foo"]) == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("transformer-attention: error: --device 'foo' is")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize(  # (--output checkpoint.pt is refused as a format: .pt is no image)
    ("option", "through_a_link"), [("--json", False), ("--json", True), ("--output", True)]
)
def test_an_output_never_replaces_the_checkpoint(
    checkpoint, tmp_path, capsys, option, through_a_link
):
    before = checkpoint.read_bytes()
    target = checkpoint
    if through_a_link:
        target = tmp_path / "map.png"
        target.symlink_to(checkpoint)
    argv = ["--checkpoint", str(checkpoint), "--src", SHORT, option, str(target)]
    assert main(argv) == 1
    (error,) = capsys.readouterr().err.splitlines()
    assert error.startswith(f"transformer-attention: error: {option} {target} is also an input")
    assert checkpoint.read_bytes() == before


def test_json_and_output_naming_one_file_is_a_usage_error(checkpoint, tmp_path, capsys):
    same = str(tmp_path / "map.png")
    argv = ["--checkpoint", str(checkpoint), "--src", SHORT, "--json", same, "--output", same]
    assert main(argv) == 2
    assert "--output and --json name the same file" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_an_image_format_matplotlib_lacks_fails_before_the_model_loads(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    never = str(tmp_path / "never-read.pt")
    assert main(["--checkpoint", never, "--src", SHORT, "--output", str(tmp_path / "m.txt")]) == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith(f"transformer-attention: error: --output {tmp_path / 'm.txt'}: ")
    assert "cannot write .txt images" in error and ".png" in error and ".svg" in error


def test_a_dangling_link_as_output_fails_before_the_model_loads(tmp_path, capsys):
    link = tmp_path / "m.json"
    link.symlink_to(tmp_path / "missing" / "m.json")
    never = str(tmp_path / "never-read.pt")
    assert main(["--checkpoint", never, "--src", SHORT, "--json", str(link)]) == 1
    (error,) = capsys.readouterr().err.splitlines()
    assert error.startswith(f"transformer-attention: error: --json {link} is a symbolic link")
