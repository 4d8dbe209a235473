"""A run's training curves from its metrics.jsonl, drawn with matplotlib.

Four panels against the update step: the label-smoothed loss per target token of training
(and of validation, where validated), the validation BLEU, the learning rate and the target
tokens per second, from the `{"type": "train"}` and `{"type": "valid"}` records that
`transformer.train` writes (`transformer.train.metrics_log`). A panel without data says so.
`transformer-plot` is the command line on top of `read_metrics` and `draw_training_curves`.
Drawing needs matplotlib (the `viz` extra).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from transformer.atomic import atomic_write
from transformer.evaluate.plot import image_format

CURVES_INSTALL_HINT = (
    "drawing training curves needs matplotlib: pip install matplotlib "
    "(or pip install -e '.[viz]' in a clone of this repository)"
)

# Each panel: its title, y-axis label and lines, a line being (record type, field, legend).
PANELS = (
    (
        "loss",
        "label-smoothed loss per target token",
        (("train", "loss", "training"), ("valid", "loss", "validation")),
    ),
    ("validation BLEU", "BLEU", (("valid", "bleu", "validation BLEU"),)),
    ("learning rate", "learning rate", (("train", "lr", "learning rate"),)),
    ("training speed", "target tokens per second", (("train", "tokens_per_second", "tokens/s"),)),
)
FIGSIZE = (11.0, 7.5)  # inches; at DPI dots per inch: an image of 1100 x 750 pixels
DPI = 100


@dataclass(frozen=True)
class Curve:
    """One line of a panel: the values of `field` in the records of `kind`, by step."""

    kind: str
    field: str
    label: str
    steps: list[float]
    values: list[float]


def read_metrics(path: str | Path) -> list[dict]:
    """The records of a metrics.jsonl file, checked line by line.

    Every complete line must be a record: a plot of a damaged file says where it is damaged
    (`MetricsLog.read`, which resumes training, skips such lines). A last line without its
    newline that is not a record is left out: training is appending it (a plot drawn while the
    run trains) or a crash cut it off; so are blank lines at the end.

    Args:
        path: The file.

    Returns:
        The records, in the file's order.

    Raises:
        OSError: when the file cannot be read.
        ValueError: naming the file and line, for a line that is not UTF-8, empty, not a JSON
            object, or lacks a string "type" or a finite numeric "step", or whose "loss", "bleu",
            "lr" or "tokens_per_second" is not a number; or for a file without records.
    """
    path = Path(path)
    lines = path.read_bytes().split(b"\n")
    unfinished = lines.pop()  # after the last newline: b"" or a line still being written
    if unfinished.strip() and _is_record(unfinished):
        lines.append(unfinished)
    while lines and not lines[-1].strip():  # blank lines at the end (an editor's) hold nothing
        lines.pop()
    records = []
    fields = {field for _, _, panel_lines in PANELS for _, field, _ in panel_lines}
    for number, raw in enumerate(lines, start=1):
        where = f"{path}: line {number}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{where} is not valid UTF-8 ({error.reason})") from None
        if not line.strip():
            raise ValueError(f"{where} is empty; each line must be one JSON record")
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where} is not a JSON record ({error.msg}): {line[:80]}") from None
        if not isinstance(record, dict):
            raise ValueError(f"{where} is not a JSON object: {line[:80]}")
        if not isinstance(record.get("type"), str):
            raise ValueError(f'{where} has no "type" (train or valid): {line[:80]}')
        step = record.get("step")
        if not (_is_number(step) and math.isfinite(step)):
            raise ValueError(f"{where}: 'step' ({step!r}) is not a finite number")
        for field in sorted(fields & record.keys()):
            if not _is_number(record.get(field)):
                shown = record.get(field)
                raise ValueError(f"{where}: {field!r} ({shown!r}) is not a number")
        records.append(record)
    if not records:
        raise ValueError(
            f"{path} holds no records yet (training writes one every train.log_interval_steps "
            "updates)"
        )
    return records


def _is_record(raw: bytes) -> bool:
    """Whether `raw` is one JSON object (an unfinished last line usually is not)."""
    try:
        return isinstance(json.loads(raw.decode("utf-8")), dict)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False


def training_curves(records: Sequence[dict]) -> list[tuple[str, str, list[Curve]]]:
    """The data of each panel of `PANELS`: (title, y label, its curves with data).

    Args:
        records: metrics.jsonl records (`read_metrics`).

    Returns:
        One (title, y label, curves) per panel; a curve is left out when no record of its kind
        has its field, so a panel's list may be empty.
    """
    panels = []
    for title, ylabel, lines in PANELS:
        curves = []
        for kind, field, label in lines:
            held = [r for r in records if r.get("type") == kind and _is_number(r.get(field))]
            if held:
                steps = [r["step"] for r in held]
                curves.append(Curve(kind, field, label, steps, [r[field] for r in held]))
        panels.append((title, ylabel, curves))
    return panels


def _figure_class():
    """matplotlib's `Figure` (drawn without pyplot, so no display or global state is needed)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(CURVES_INSTALL_HINT) from error
    return Figure


def output_format(output: str | Path) -> str:
    """The format `draw_training_curves` saves `output` in: its suffix (png when none).

    Raises:
        ImportError: without matplotlib, saying how to install it (`CURVES_INSTALL_HINT`).
        ValueError: for a format matplotlib cannot write, listing those it can.
    """
    _figure_class()
    return image_format(output)


def draw_training_curves(
    records: Sequence[dict], output: str | Path | None = None, title: str | None = None
):
    """The four panels of `PANELS` in one figure of `FIGSIZE` inches at `DPI`, in that order
    (row by row); each panel's lines are its curves (`training_curves`), in order.

    Args:
        records: metrics.jsonl records (`read_metrics`).
        output: Save the figure there, atomically (format from the suffix, `output_format`).
        title: The figure's title (e.g. the run directory).

    Returns:
        The matplotlib `Figure`; a panel without data holds a text that says so.

    Raises:
        ImportError: without matplotlib, saying how to install it (`CURVES_INSTALL_HINT`).
        ValueError: for an `output` format matplotlib cannot write.
    """
    Figure = _figure_class()
    figure = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    for index, (panel, ylabel, curves) in enumerate(training_curves(records)):
        lines = PANELS[index][2]
        ax = figure.add_subplot(2, 2, index + 1)
        ax.set_title(panel, fontsize=10)
        ax.set_xlabel("update step", fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.grid(True, alpha=0.3)
        for curve in curves:
            marker = "." if len(curve.steps) <= 100 else None
            ax.plot(curve.steps, curve.values, marker=marker, label=curve.label)
        if curves and len(lines) > 1:  # one line: the title names it
            ax.legend(fontsize=8)
        if not curves:
            wanted = "; ".join(f"no {kind} record has {field!r}" for kind, field, _ in lines)
            where = dict(ha="center", va="center", transform=ax.transAxes)
            ax.text(0.5, 0.5, f"no data: {wanted}", fontsize=9, wrap=True, **where)
    if title:
        figure.suptitle(title, fontsize=11)
    if output is not None:
        fmt = output_format(output)
        atomic_write(output, lambda file: figure.savefig(file, format=fmt, dpi=DPI))
    return figure


def _is_number(value) -> bool:
    """An int or a float (NaN and infinities too: a diverged run), not a boolean."""
    return isinstance(value, int | float) and not isinstance(value, bool)
