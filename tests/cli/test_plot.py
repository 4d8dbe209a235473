"""Tests for transformer/cli/plot.py (the transformer-plot command), on the metrics.jsonl of a
tiny real training run (configs/tiny.yaml on a slice of Multi30k, CPU, seconds) with
validation.

References: `json.loads` of the run's metrics.jsonl lines, against the line data of the figure
the command drew; Pillow's reading of the PNG it wrote. Every error is one line, no traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from transformer.cli import plot
from transformer.cli.plot import main
from transformer.config import load_config
from transformer.evaluate.training_curves import DPI, FIGSIZE
from transformer.train.trainer import Trainer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, shared_data) -> Path:
    """A 4-update run logged at every update and validated (loss and BLEU) at 2 and 4."""
    run_dir = tmp_path_factory.mktemp("plot") / "run"
    overrides = ["train.log_interval_steps=1", "train.num_threads=1", "train.max_steps=4"]
    overrides += ["train.validate_interval_steps=2", "train.valid_bleu_sentences=4"]
    overrides += [f"train.output_dir={run_dir}", "train.save_interval_steps=null"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
        Trainer(load_config(REPO / "configs" / "tiny.yaml", overrides)).train()
    return run_dir


def records(run_dir: Path, kind: str) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["type"] == kind]


def test_the_curves_of_a_real_run_are_its_records(run_dir, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    from PIL import Image

    drawn = []
    real = plot.draw_training_curves
    monkeypatch.setattr(plot, "draw_training_curves", lambda *a, **k: drawn.append(real(*a, **k)))
    assert main([str(run_dir)]) == 0
    output = run_dir / "training_curves.png"
    assert f"wrote {output}" in capsys.readouterr().out
    with Image.open(output) as image:
        assert image.format == "PNG"
        assert image.size == (round(FIGSIZE[0] * DPI), round(FIGSIZE[1] * DPI))
        image.verify()

    train, valid = records(run_dir, "train"), records(run_dir, "valid")
    assert [r["step"] for r in train] == [1, 2, 3, 4] and [r["step"] for r in valid] == [2, 4]
    (figure,) = drawn
    loss, bleu, lr, speed = figure.axes
    steps = [r["step"] for r in train]
    (training, validation) = loss.lines
    assert list(training.get_xdata()) == steps
    assert list(training.get_ydata()) == [r["loss"] for r in train]
    assert list(validation.get_xdata()) == [2, 4]
    assert list(validation.get_ydata()) == [r["loss"] for r in valid]
    assert list(bleu.lines[0].get_ydata()) == [r["bleu"] for r in valid]
    assert list(lr.lines[0].get_ydata()) == [r["lr"] for r in train]
    assert list(speed.lines[0].get_ydata()) == [r["tokens_per_second"] for r in train]
    assert figure._suptitle.get_text() == str(run_dir)


def test_output_elsewhere_and_in_another_format(run_dir, tmp_path):
    pytest.importorskip("matplotlib")
    assert main([str(run_dir), "--output", str(tmp_path / "curves.svg")]) == 0
    assert (tmp_path / "curves.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")


def test_the_metrics_file_itself_draws_beside_it(run_dir, tmp_path, capsys):
    """A copied metrics.jsonl (no run directory around it) is drawn into the same folder."""
    pytest.importorskip("matplotlib")
    copy = tmp_path / "copies" / "en-de.jsonl"
    copy.parent.mkdir()
    copy.write_bytes((run_dir / "metrics.jsonl").read_bytes())
    assert main([str(copy)]) == 0
    expected = sum(1 for _ in copy.open())
    assert capsys.readouterr().out.strip() == (
        f"wrote {tmp_path / 'copies' / 'training_curves.png'} ({expected} records of {copy})"
    )


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[-1].startswith("transformer-plot: error: ") and "Traceback" not in err
    return lines[-1]


@pytest.mark.parametrize("kind", ["missing", "file", "empty directory", "metrics directory"])
def test_a_run_directory_that_is_not_one(tmp_path, capsys, kind):
    path = tmp_path / "run"
    if kind == "file":
        path.write_text("x")
    elif kind == "empty directory":
        path.mkdir()
    elif kind == "metrics directory":
        (path / "metrics.jsonl").mkdir(parents=True)
    assert main([str(path)]) == 1
    error = one_line_error(capsys)
    expected = {
        "missing": "no such run directory",
        "file": "is neither a directory nor a .jsonl file",
        "empty directory": "has no metrics.jsonl",
        "metrics directory": "metrics.jsonl is not a file",
    }
    assert str(path) in error and expected[kind] in error


def test_a_damaged_metrics_file_is_named_with_its_line(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    record = '{"type": "train", "step": 1, "loss": 5.0}\n'
    (run / "metrics.jsonl").write_text(record + "\n" + record)  # a blank line between records
    assert main([str(run)]) == 1
    assert f"{run / 'metrics.jsonl'}: line 2 is empty" in one_line_error(capsys)
    assert not (run / "training_curves.png").exists()


def test_outputs_that_cannot_be_written(run_dir, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    missing = tmp_path / "no" / "curves.png"
    assert main([str(run_dir), "--output", str(missing)]) == 1
    assert "does not exist" in one_line_error(capsys) and not missing.parent.exists()
    # An output that is metrics.jsonl itself (through a link): refused, the file is kept.
    link = tmp_path / "curves.png"
    link.symlink_to(run_dir / "metrics.jsonl")
    before = (run_dir / "metrics.jsonl").read_bytes()
    assert main([str(run_dir), "--output", str(link)]) == 1
    assert "also an input" in one_line_error(capsys)
    assert (run_dir / "metrics.jsonl").read_bytes() == before
    # A format matplotlib cannot write is a wrong command line (exit 2).
    assert main([str(run_dir), "--output", str(tmp_path / "curves.txt")]) == 2
    assert "cannot write .txt images" in one_line_error(capsys)
    assert main([str(run_dir), "--output", str(run_dir / "metrics.jsonl")]) == 2
    one_line_error(capsys)
    assert (run_dir / "metrics.jsonl").read_bytes() == before


def test_without_matplotlib_the_error_says_how_to_install_it(run_dir, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # as if not installed
    assert main([str(run_dir), "--output", str(run_dir / "x.png")]) == 1
    assert "pip install matplotlib" in one_line_error(capsys)
    assert not (run_dir / "x.png").exists()


@pytest.mark.parametrize("count", [1, 2])
def test_the_count_of_records_is_singular_for_one(tmp_path, capsys, count):
    pytest.importorskip("matplotlib")
    run = tmp_path / "run"
    run.mkdir()
    lines = [json.dumps({"type": "train", "step": s, "loss": 5.0}) for s in range(1, count + 1)]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert main([str(run)]) == 0
    noun = "record" if count == 1 else "records"
    assert f"({count} {noun} of {run / 'metrics.jsonl'})" in capsys.readouterr().out
