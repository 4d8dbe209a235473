"""Heatmaps of attention weights, like Figures 3 to 5 of the paper (drawn with matplotlib).

The weights come from `transformer.evaluate.attention_maps`; `transformer-attention` is the
command line on top of `draw_attention`. Drawing needs matplotlib (the `viz` extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from transformer.atomic import atomic_write
from transformer.evaluate.attention_maps import AttentionMaps

VIZ_INSTALL_HINT = (
    "drawing attention maps needs matplotlib: pip install matplotlib "
    "(or pip install -e '.[viz]' in a clone of this repository)"
)


# Tokens per axis drawn at most: each takes 0.32 inch at 120 dpi, so the canvas grows with the
# square of the length (1400 tokens asked matplotlib for gigabytes); 128 is data.max_len's default.
MAX_TOKENS_PER_AXIS = 128

AXIS_NAMES = {  # kind -> (rows, columns)
    "self": ("source (query)", "source (key)"),
    "cross": ("predicted target token", "source"),
    "decoder-self": ("predicted target token", "decoder input"),
}


def _figure_class():
    """matplotlib's `Figure` (drawn without pyplot, so no display or global state is needed)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(VIZ_INSTALL_HINT) from error
    return Figure


def image_format(output: str | Path) -> str:
    """The format `draw_attention` saves `output` in: its suffix in lower case (`map.svg`: svg),
    png when it has none.

    Raises:
        ImportError: without matplotlib, saying how to install it (`VIZ_INSTALL_HINT`).
        ValueError: for a format matplotlib cannot write (`map.txt`), listing those it can.
    """
    fmt = Path(output).suffix.lstrip(".").lower() or "png"
    supported = _figure_class()().canvas.get_supported_filetypes()
    if fmt not in supported:
        raise ValueError(
            f"{output}: matplotlib cannot write .{fmt} images; give one of "
            + ", ".join(f".{name}" for name in sorted(supported))
        )
    return fmt


def draw_attention(
    maps: AttentionMaps,
    layer: int = -1,
    heads: Sequence[int] | None = None,
    average_heads: bool = False,
    output: str | Path | None = None,
):
    """Heatmaps of one layer's weights: one panel per head, or one panel of their average.

    Axes carry the subword labels, queries down the rows and keys along the columns, as in the
    paper's Figures 3 to 5; darker means more weight (the scale is fixed to [0, 1]).

    Args:
        maps: From `attention_weights`.
        layer: 0-based layer index; negative counts from the last layer.
        heads: 0-based heads to draw (default: all); with `average_heads`, the heads averaged.
        average_heads: Draw the mean over `heads` in a single panel.
        output: Save the figure there (format from the suffix, `image_format`) when given.

    Returns:
        The matplotlib `Figure`; its heatmap axes are those with an image (the colour bar is
        one more axes).

    Raises:
        ImportError: without matplotlib, saying how to install it (`VIZ_INSTALL_HINT`).
        ValueError: for a layer or head out of range, more than `MAX_TOKENS_PER_AXIS` tokens on
            an axis, or an `output` format matplotlib lacks.
    """
    Figure = _figure_class()
    n_layers, n_heads, T, S = maps.weights.shape
    if max(T, S) > MAX_TOKENS_PER_AXIS:
        raise ValueError(
            f"the map has {T} x {S} tokens (rows x columns): at most {MAX_TOKENS_PER_AXIS} per axis"
            " can be drawn legibly; pass a shorter sentence"
        )
    if not -n_layers <= layer < n_layers:
        raise ValueError(
            f"layer {layer} is out of range: the model has {n_layers} layers (0-based)"
        )
    layer = layer % n_layers
    heads = list(range(n_heads)) if heads is None else list(heads)
    bad = [h for h in heads if not 0 <= h < n_heads]
    if bad or not heads:
        raise ValueError(
            f"heads {bad or heads} out of range: the model has {n_heads} heads (0-based)"
        )
    selected = maps.weights[layer, heads]  # (H', T, S)
    if average_heads:
        panels = [(selected.mean(dim=0), f"layer {layer}, mean of heads {_span(heads)}")]
    else:
        panels = [(selected[i], f"layer {layer}, head {h}") for i, h in enumerate(heads)]
    n_cols = min(len(panels), 4)
    n_rows = -(-len(panels) // n_cols)
    # At least 4 rows and columns of room: an empty translation (T = 1) still fits its labels.
    panel_w, panel_h = 1.5 + 0.32 * max(S, 4), 1.2 + 0.32 * max(T, 4)
    figure = Figure(figsize=(panel_w * n_cols + 1.0, panel_h * n_rows), layout="constrained")
    image = None
    for index, (matrix, title) in enumerate(panels):
        ax = figure.add_subplot(n_rows, n_cols, index + 1)
        image = ax.imshow(matrix.numpy(), cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(S), maps.key_labels, rotation=90, fontsize=8)
        ax.set_yticks(range(T), maps.query_labels, fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(AXIS_NAMES[maps.kind][0], fontsize=8)
        ax.set_xlabel(AXIS_NAMES[maps.kind][1], fontsize=8)
    figure.colorbar(image, ax=figure.axes, shrink=0.8, label="attention weight")
    empty = maps.kind != "self" and not maps.target  # only </s> was predicted
    figure.suptitle(f"{maps.kind} attention" + (" (the translation is empty)" * empty), fontsize=10)
    if output is not None:
        fmt = image_format(output)
        atomic_write(output, lambda file: figure.savefig(file, format=fmt, dpi=120))
    return figure


def _span(heads: list[int]) -> str:
    """'0-7' for a contiguous range of heads, else the list."""
    if heads == list(range(heads[0], heads[-1] + 1)):
        return f"{heads[0]}-{heads[-1]}" if len(heads) > 1 else str(heads[0])
    return ",".join(map(str, heads))
