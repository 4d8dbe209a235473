"""Tests for transformer/evaluate/plot.py: one heatmap panel per requested head (or one of their
mean) showing exactly the weights of `attention_weights`, labelled axes, a real PNG, and errors
that name the value.

References: the weights themselves (tested against closed-form facts in
test_attention_maps.py), the PNG signature and matplotlib's own reader for the image.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from transformer.evaluate.attention_maps import AttentionMaps, attention_weights
from transformer.evaluate.plot import (
    AXIS_NAMES,
    MAX_TOKENS_PER_AXIS,
    draw_attention,
    image_format,
)

needs_matplotlib = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib (the viz extra)"
)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SOURCE, TARGET = "A man is riding a horse.", "Ein Mann."


def heatmap_axes(figure) -> list:
    """The panels (axes holding an image), leaving out the colour bar."""
    return [ax for ax in figure.axes if ax.images]


@needs_matplotlib
@pytest.mark.parametrize(
    ("heads", "average", "panels"), [(None, False, 4), ([0, 2], False, 2), ([1, 3], True, 1)]
)
def test_one_panel_per_requested_head_and_png_written(
    tiny_model, tiny_tokenizer, tmp_path, heads, average, panels
):
    from matplotlib.image import imread

    maps = attention_weights(tiny_model, tiny_tokenizer, SOURCE, TARGET, "cross")
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


@needs_matplotlib
@pytest.mark.parametrize("kind", list(AXIS_NAMES))
def test_every_panel_shows_its_own_heads_weights_and_names_the_axes(
    tiny_model, tiny_tokenizer, kind
):
    maps = attention_weights(tiny_model, tiny_tokenizer, SOURCE, TARGET, kind)
    n_heads = maps.weights.shape[1]
    axes = heatmap_axes(draw_attention(maps, layer=0))
    assert [ax.get_title() for ax in axes] == [f"layer 0, head {h}" for h in range(n_heads)]
    for head, ax in enumerate(axes):
        shown = torch.as_tensor(ax.images[0].get_array().data)
        torch.testing.assert_close(shown, maps.weights[0, head], atol=1e-6, rtol=0)
        assert (ax.get_ylabel(), ax.get_xlabel()) == AXIS_NAMES[kind]
        assert ax.images[0].get_clim() == (0.0, 1.0)  # one fixed scale: panels compare


@needs_matplotlib
def test_negative_layers_count_from_the_last(tiny_model, tiny_tokenizer):
    maps = attention_weights(tiny_model, tiny_tokenizer, SOURCE, TARGET, "cross")
    n_layers = maps.weights.shape[0]
    for layer in range(-n_layers, 0):
        (ax,) = heatmap_axes(draw_attention(maps, layer=layer, heads=[2]))
        shown = torch.as_tensor(ax.images[0].get_array().data)
        torch.testing.assert_close(shown, maps.weights[n_layers + layer, 2], atol=1e-6, rtol=0)
        assert ax.get_title() == f"layer {n_layers + layer}, head 2"


@needs_matplotlib
@pytest.mark.parametrize(
    ("heads", "title"), [([0, 1, 2, 3], "0-3"), ([2], "2"), ([1, 2], "1-2"), ([0, 2, 3], "0,2,3")]
)
def test_the_mean_panel_names_the_heads_it_averages(tiny_model, tiny_tokenizer, heads, title):
    maps = attention_weights(tiny_model, tiny_tokenizer, SOURCE, TARGET, "self")
    (ax,) = heatmap_axes(draw_attention(maps, layer=0, heads=heads, average_heads=True))
    assert ax.get_title() == f"layer 0, mean of heads {title}"
    shown = torch.as_tensor(ax.images[0].get_array().data)
    torch.testing.assert_close(shown, maps.weights[0, heads].mean(0), atol=1e-6, rtol=0)


@needs_matplotlib
def test_out_of_range_layer_or_head_names_the_value(tiny_model, tiny_tokenizer):
    maps = attention_weights(tiny_model, tiny_tokenizer, SOURCE[:6], kind="self")
    n_layers, n_heads = maps.weights.shape[:2]
    with pytest.raises(ValueError, match=f"layer {n_layers} is out of range"):
        draw_attention(maps, layer=n_layers)
    with pytest.raises(ValueError, match=f"layer {-n_layers - 1} is out of range"):
        draw_attention(maps, layer=-n_layers - 1)
    with pytest.raises(ValueError, match=rf"heads \[{n_heads}\] out of range"):
        draw_attention(maps, heads=[0, n_heads])
    with pytest.raises(ValueError, match=r"heads \[-1\] out of range"):
        draw_attention(maps, heads=[-1])
    with pytest.raises(ValueError, match=r"heads \[\] out of range"):
        draw_attention(maps, heads=[])


def test_without_matplotlib_says_how_to_install(tiny_model, tiny_tokenizer, monkeypatch):
    maps = attention_weights(tiny_model, tiny_tokenizer, SOURCE, kind="self")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        draw_attention(maps)


@needs_matplotlib
def test_image_format_is_the_suffix_matplotlib_writes():
    assert [image_format(name) for name in ("m.png", "m.SVG", "m.pdf", "m")] == [
        "png",
        "svg",
        "pdf",
        "png",
    ]
    with pytest.raises(ValueError, match=r"^m\.txt: matplotlib cannot write \.txt images; give"):
        image_format("m.txt")


@needs_matplotlib
def test_an_empty_translation_is_said_and_no_label_runs_into_the_title():
    """A model that translated to nothing gave one-row panels whose y-axis label ran into the
    title (#17, new-user pass): the title now says so, and matplotlib's own layout of the
    drawn figure shows no label overlapping it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    S = 8  # one query row (</s>) over 8 source pieces
    weights = torch.softmax(torch.randn(2, 4, 1, S, generator=torch.Generator().manual_seed(0)), -1)
    keys = [f"\u2581w{i}" for i in range(S)]
    maps = AttentionMaps(weights, "cross", ["</s>"], keys, SOURCE, target="")
    figure = draw_attention(maps, layer=1)
    FigureCanvasAgg(figure).draw()
    renderer = figure.canvas.get_renderer()
    title = figure.get_suptitle()
    assert title == "cross attention (the translation is empty)"
    title_box = figure._suptitle.get_window_extent(renderer)
    for ax in heatmap_axes(figure):
        texts = [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.get_yticklabels()]
        assert not [
            t.get_text() for t in texts if title_box.overlaps(t.get_window_extent(renderer))
        ]


@needs_matplotlib
@pytest.mark.parametrize(("T", "S"), [(1, MAX_TOKENS_PER_AXIS + 1), (MAX_TOKENS_PER_AXIS + 1, 3)])
def test_a_map_too_long_to_draw_is_refused_in_one_line_and_nothing_is_written(T, S, tmp_path):
    """A 1400-token sentence made matplotlib ask for gigabytes and die with a MemoryError
    traceback (#17, bad-input pass): more than MAX_TOKENS_PER_AXIS on either axis is a
    ValueError naming the size, before any figure or file exists; the limit itself is drawn."""
    weights = torch.full((1, 1, T, S), 1.0 / S)
    maps = AttentionMaps(weights, "cross", ["x"] * T, ["y"] * S, SOURCE, target="x")
    output = tmp_path / "too_long.png"
    with pytest.raises(ValueError, match=rf"{T} x {S} tokens .* at most {MAX_TOKENS_PER_AXIS}"):
        draw_attention(maps, output=output)
    assert not output.exists() and not list(tmp_path.iterdir())
    edge = MAX_TOKENS_PER_AXIS
    limit = AttentionMaps(
        torch.full((1, 1, 2, edge), 1.0 / edge),
        "cross",
        ["x"] * 2,
        ["y"] * edge,
        SOURCE,
        target="x",
    )
    draw_attention(limit, output=output)
    assert output.read_bytes().startswith(PNG_SIGNATURE)
