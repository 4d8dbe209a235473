"""Tests for scripts/gpu_check_data.sh: which folder it copies from, and what it writes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NEWS = ("news-test2008", "newssyscomb2009", "newstest2009", "newstest2010", "newstest2011")
FILES = (
    *(f"newstest-2008-2012-en-de/{name}" for name in (*NEWS, "newstest2012")),
    "wmt14-en-de/newstest2013",
    "wmt14-en-de/newstest2014",
    "multi30k/train",
    "multi30k/val",
)


def _shared_data(folder: Path) -> None:
    """A data folder of the shared layout: each file two lines, named by its path."""
    for prefix in FILES:
        for lang in ("en", "de"):
            path = folder / f"{prefix}.{lang}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{prefix} 1 {lang}\n{prefix} 2 {lang}\n", encoding="utf-8")


def _copy_of_the_script(tmp_path: Path) -> Path:
    """The script in a repository of its own (it writes gpu_data/ beside its scripts/)."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "gpu_check_data.sh", repo / "scripts")
    return repo


def test_a_relative_folder_is_the_callers_not_the_repositorys(tmp_path):
    """It changed to the repository first, so `gpu_check_data.sh data` looked in repo/data."""
    repo = _copy_of_the_script(tmp_path)
    _shared_data(tmp_path / "elsewhere" / "data")
    script = repo / "scripts" / "gpu_check_data.sh"
    done = subprocess.run(
        ["bash", str(script), "data"], cwd=tmp_path / "elsewhere", capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    train = (repo / "gpu_data" / "news" / "train.en").read_text(encoding="utf-8").splitlines()
    assert len(train) == 2 * 7 and train[0] == "newstest-2008-2012-en-de/news-test2008 1 en"
    assert (repo / "gpu_data" / "multi30k" / "val.de").is_file()


def test_a_missing_folder_is_one_line_naming_the_absolute_path(tmp_path):
    repo = _copy_of_the_script(tmp_path)
    done = subprocess.run(
        ["bash", str(repo / "scripts" / "gpu_check_data.sh"), "nowhere"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"gpu_check_data: {tmp_path}/nowhere/multi30k/train.en not found "
        "(pass the shared data folder)\n"
    )
    assert not (repo / "gpu_data").exists()
