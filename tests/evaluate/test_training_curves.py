"""Tests for transformer/evaluate/training_curves.py: reading metrics.jsonl and drawing it.

References: the records written here by hand (and `json.loads` of the lines), against the line
data of the drawn matplotlib Figure; Pillow's reading of the PNG for its size. Every damage to
the file is named with the file and its line number.
"""

from __future__ import annotations

import json
import math
import sys

import pytest

from transformer.evaluate import training_curves
from transformer.evaluate.training_curves import (
    CURVES_INSTALL_HINT,
    DPI,
    FIGSIZE,
    draw_training_curves,
    read_metrics,
)

RECORDS = [
    {"type": "train", "step": 10, "loss": 6.0, "lr": 1e-4, "tokens_per_second": 900.0},
    {"type": "train", "step": 20, "loss": 5.0, "lr": 2e-4, "tokens_per_second": 1100.0},
    {"type": "valid", "step": 20, "loss": 5.5, "ppl": 90.0, "bleu": 1.5, "best": True},
    {"type": "train", "step": 30, "loss": 4.5, "lr": 1.5e-4, "tokens_per_second": 1000.0},
    {"type": "valid", "step": 30, "loss": 5.1, "ppl": 60.0, "bleu": 2.5, "best": True},
]


def write(path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def lines_of(axes) -> list[tuple[str, list, list]]:
    """(legend label, x data, y data) of each line of a panel."""
    return [(ln.get_label(), list(ln.get_xdata()), list(ln.get_ydata())) for ln in axes.lines]


def test_read_metrics_returns_the_records_in_order(tmp_path):
    path = tmp_path / "metrics.jsonl"
    write(path, [json.dumps(record) for record in RECORDS])
    assert read_metrics(path) == RECORDS


@pytest.mark.parametrize(
    "lines, line_number, problem",
    [
        ([json.dumps(RECORDS[0]), "", json.dumps(RECORDS[1])], 2, "is empty"),
        ([json.dumps(RECORDS[0]), '{"type": "train", "step": 20, "lo'], 2, "not a JSON record"),
        (["[1, 2]"], 1, "not a JSON object"),
        (['{"step": 1, "loss": 2.0}'], 1, 'no "type"'),
        (['{"type": "train", "loss": 2.0}'], 1, "'step' (None) is not a finite number"),
        (['{"type": "train", "step": true}'], 1, "'step' (True) is not a finite number"),
        (['{"type": "train", "step": NaN}'], 1, "'step' (nan) is not a finite number"),
        (['{"type": "train", "step": Infinity}'], 1, "'step' (inf) is not a finite number"),
        (['{"type": "train", "step": 1}', '{"type": "train", "step": 2, "loss": "x"}'], 2, "loss"),
    ],
)
def test_a_damaged_line_is_named_with_the_file_and_its_number(
    tmp_path, lines, line_number, problem
):
    path = tmp_path / "metrics.jsonl"
    write(path, lines)
    with pytest.raises(ValueError) as error:
        read_metrics(path)
    assert str(error.value).startswith(f"{path}: line {line_number}")
    assert problem in str(error.value)


def test_a_last_line_still_being_written_is_left_out_and_a_whole_one_kept(tmp_path):
    path = tmp_path / "metrics.jsonl"
    whole = "".join(json.dumps(record) + "\n" for record in RECORDS[:2])
    path.write_text(whole + json.dumps(RECORDS[2])[:17], encoding="utf-8")
    assert read_metrics(path) == RECORDS[:2]
    path.write_text(whole + json.dumps(RECORDS[2]), encoding="utf-8")  # its newline not yet
    assert read_metrics(path) == RECORDS[:3]
    path.write_text(whole + json.dumps(RECORDS[2])[:17] + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 3 is not a JSON record"):
        read_metrics(path)


def test_a_line_that_is_not_utf8_and_a_file_without_records(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"type": "train", "step": 1}\n{"type": "\xff"}\n')
    with pytest.raises(ValueError, match=r"line 2 is not valid UTF-8"):
        read_metrics(path)
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="holds no records yet"):
        read_metrics(path)


def test_the_panels_draw_exactly_the_records(tmp_path):
    pytest.importorskip("matplotlib")
    figure = draw_training_curves(RECORDS, title="run")
    loss, bleu, lr, speed = figure.axes
    assert loss.get_title() == "loss"
    assert lines_of(loss) == [
        ("training", [10, 20, 30], [6.0, 5.0, 4.5]),
        ("validation", [20, 30], [5.5, 5.1]),
    ]
    assert lines_of(bleu) == [("validation BLEU", [20, 30], [1.5, 2.5])]
    assert lines_of(lr) == [("learning rate", [10, 20, 30], [1e-4, 2e-4, 1.5e-4])]
    assert lines_of(speed) == [("tokens/s", [10, 20, 30], [900.0, 1100.0, 1000.0])]
    assert all(not axes.texts for axes in figure.axes)
    assert figure._suptitle.get_text() == "run"


def test_a_panel_without_data_says_so_and_nan_is_drawn_as_a_gap(tmp_path):
    pytest.importorskip("matplotlib")
    records = [
        {"type": "train", "step": 1, "loss": 7.0, "lr": 1e-4},
        {"type": "train", "step": 2, "loss": float("nan"), "lr": 2e-4},
    ]
    loss, bleu, lr, speed = draw_training_curves(records).axes
    assert [label for label, _, _ in lines_of(loss)] == ["training"]  # no validation line
    x, y = lines_of(loss)[0][1:]
    assert x == [1, 2] and y[0] == 7.0 and math.isnan(y[1])
    assert not bleu.lines and [t.get_text() for t in bleu.texts] == [
        "no data: no valid record has 'bleu'"
    ]
    assert not speed.lines and "tokens_per_second" in speed.texts[0].get_text()
    assert lines_of(lr) == [("learning rate", [1, 2], [1e-4, 2e-4])]


def test_the_png_is_a_whole_image_of_the_figure_size(tmp_path):
    pytest.importorskip("matplotlib")
    from PIL import Image

    output = tmp_path / "curves.png"
    draw_training_curves(RECORDS, output)
    with Image.open(output) as image:
        assert image.format == "PNG"
        assert image.size == (round(FIGSIZE[0] * DPI), round(FIGSIZE[1] * DPI))
        image.verify()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curves.png"]  # no temporary left


def test_an_unknown_format_and_missing_matplotlib(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    with pytest.raises(ValueError, match=r"cannot write \.txt images"):
        draw_training_curves(RECORDS, tmp_path / "curves.txt")
    assert not (tmp_path / "curves.txt").exists()
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # as if not installed
    with pytest.raises(ImportError) as error:
        training_curves.output_format(tmp_path / "curves.png")
    assert (
        str(error.value) == CURVES_INSTALL_HINT and "pip install matplotlib" in CURVES_INSTALL_HINT
    )


def test_blank_lines_at_the_end_are_left_out(tmp_path):
    """One blank line after the last record failed the whole plot ("line 3 is empty")."""
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS[:2]) + "\n \n", encoding="utf-8")
    assert read_metrics(path) == RECORDS[:2]
