"""Every shell command of the ```bash blocks of README.md and docs/*.md that calls only this
project's console scripts (and `echo`) runs as written, and writes the files it names.

Each runs with bash in `setting`, a temporary directory that stands in for a clone after
`make demo`: `configs/`, the console scripts of this Python's environment first on PATH,
`../shared/data` with Multi30k and a 4-line newstest2014, and a 3 + 3-layer run of
configs/tiny.yaml (trained in seconds) standing in for the demo's
`checkpoints/multi30k_en-de/` and its `checkpoint_avg5.pt`. A command with optional
`[--x ...]` groups runs twice: without them, and with the first choice of each group. Which
commands run, and how, is in tests/documented_commands.py.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.documented_commands import (
    BIN,
    OUTPUT_OPTIONS,
    ROOT,
    RUN,
    WRITES,
    Command,
    run_ids,
)


@dataclasses.dataclass
class Setting:
    """The temporary clone the commands run in: `main` is its root, `env` their environment."""

    main: Path
    env: dict

    def copy(self, name: str) -> Path:
        """A copy of `main` beside it (hard links: every command writes its files whole, by
        replacing them), so that no command sees another's outputs."""
        copy = self.main.parent / name
        shutil.copytree(self.main, copy, symlinks=True, copy_function=os.link)
        return copy


@pytest.fixture(scope="module")
def setting(tmp_path_factory, shared_data) -> Setting:
    """A clone after `make demo`, with a tiny run standing in for the demo's (see the module
    docstring); about 10 seconds, most of them training."""
    from transformer.checkpoint import save_checkpoint
    from transformer.train.average import average_checkpoints, last_checkpoints

    root = tmp_path_factory.mktemp("clone")
    main = root / "main"
    main.mkdir()
    (main / "configs").symlink_to(ROOT / "configs")
    data = root / "shared" / "data"
    (data / "wmt14-en-de").mkdir(parents=True)
    (data / "multi30k").symlink_to(shared_data / "multi30k")
    for lang in ("en", "de"):
        lines = (shared_data / "wmt14-en-de" / f"newstest2014.{lang}").read_text("utf-8")
        (data / "wmt14-en-de" / f"newstest2014.{lang}").write_text(
            "".join(line + "\n" for line in lines.splitlines()[:4]), encoding="utf-8"
        )

    run_dir = main / "checkpoints" / "multi30k_en-de"
    env = dict(os.environ, TRANSFORMER_DATA_DIR=str(shared_data), PYTHONPATH=str(ROOT))
    tiny = ROOT / "configs" / "tiny.yaml"  # with configs/multi30k.yaml's 3 + 3 layers (--layer 2)
    train = [sys.executable, "-m", "transformer.cli.train", "--config", str(tiny)]
    train += [f"train.output_dir={run_dir}", "model.n_encoder_layers=3", "model.n_decoder_layers=3"]
    train += ["train.max_steps=5", "train.save_interval_steps=1", "train.keep_last=5"]
    train += ["data.valid=null"]
    trained = subprocess.run(train, cwd=main, env=env, capture_output=True, text=True)
    assert trained.returncode == 0, trained.stderr
    numbered = last_checkpoints(run_dir, 5)
    save_checkpoint(average_checkpoints(numbered), run_dir / "checkpoint_avg5.pt")
    shutil.copy(run_dir / "checkpoint_avg5.pt", main / "avg.pt")
    for name, source in zip(("a.pt", "b.pt", "c.pt"), numbered[:3], strict=True):
        shutil.copy(source, main / name)
    test = (shared_data / "multi30k" / "test_2016_flickr.en").read_text("utf-8").splitlines()
    refs = (shared_data / "multi30k" / "test_2016_flickr.de").read_text("utf-8").splitlines()
    (main / "test.en").write_text("\n".join(test[:3]) + "\n", encoding="utf-8")
    (main / "ref.de").write_text("\n".join(refs[:3]) + "\n", encoding="utf-8")
    (main / "hyp.de").write_text("\n".join(refs[1:4]) + "\n", encoding="utf-8")

    # As in a user's shell after `make install`: only the variables the commands set
    env = {k: v for k, v in os.environ.items() if k not in ("TRANSFORMER_DATA_DIR", "PYTHONPATH")}
    env.update(PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", OMP_NUM_THREADS="1")
    return Setting(main, env)


def run_in_copy(setting: Setting, name: str, line: str, expected: list[str]) -> str | None:
    """Run `line` with bash in a fresh copy of the setting; None, or what went wrong."""
    cwd = setting.copy(name)
    process = subprocess.Popen(
        ["bash", "-c", f"set -o pipefail; {line}"],
        cwd=cwd,
        env=setting.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so that a timeout ends the whole pipeline
    )
    try:
        _, stderr = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return f"{line}\nstill running after 300 s"
    if process.returncode != 0:
        return f"{line}\nexit {process.returncode}\n{stderr[-3000:]}"
    # transformer-export's --output is a directory (the model and its files), the others a file.
    wanted = [*written_files(line), *expected]
    missing = [path for path in wanted if not (cwd / path).exists()]
    shutil.rmtree(cwd)
    return f"{line}\ndid not write {missing}" if missing else None


@pytest.fixture(scope="module")
def runs(setting) -> dict[Command, list[str | None]]:
    """What went wrong with each variant of each command of RUN (None: nothing); two run at
    a time, each in its own copy of the setting."""
    jobs = [
        (setting, f"run{index}-{number}", line, expected_files(command))
        for index, command in enumerate(RUN)
        for number, line in enumerate(command.variants())
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = iter(pool.map(lambda job: run_in_copy(*job), jobs))
    return {command: [next(outcomes) for _ in command.variants()] for command in RUN}


@pytest.mark.slow
@pytest.mark.parametrize("command", RUN, ids=run_ids)
def test_documented_command_runs(command, runs):
    """The command exits 0 and writes the files it names (in the setting)."""
    if command.text.startswith("transformer-attention") and "--output" in command.text:
        pytest.importorskip("matplotlib")  # the `viz` extra (make test installs it)
    if command.text.startswith("transformer-plot"):
        pytest.importorskip("matplotlib")
    if "train.tensorboard=true" in command.text:
        pytest.importorskip("tensorboard")  # the `tensorboard` extra
    problems = [problem for problem in runs[command] if problem is not None]
    assert not problems, f"{command.where}: " + "\n\n".join(problems)


def written_files(line: str) -> list[str]:
    words = shlex.split(line)
    return [words[i + 1] for i, word in enumerate(words[:-1]) if word in OUTPUT_OPTIONS]


def expected_files(command: Command) -> list[str]:
    return next((files for key, files in WRITES.items() if re.search(key, command.text)), [])
