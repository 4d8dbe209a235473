"""The shell commands of README.md and docs/*.md, as the tests/test_docs_commands*.py files
find, check and run them: every one must work as written.

Each command of a ```bash block (backslash-continued lines joined, `# comments` dropped) that
calls only this project's console scripts (and `echo`) runs with bash in `setting`, a
temporary directory that stands in for a clone after `make demo`: `configs/`, the console
scripts of this Python's environment first on PATH, `../shared/data` with Multi30k and a
4-line newstest2014, and a 3 + 3-layer run of configs/tiny.yaml (trained in seconds) standing
in for the demo's `checkpoints/multi30k_en-de/` and its `checkpoint_avg5.pt`. A command with
optional `[--x ...]` groups runs twice: without them, and with the first choice of each group.

Every other command of a block must be in SKIPPED, with the reason it is not run here: other
programs (make, torchrun, shell scripts, TensorBoard's server) train for an hour, need GPUs or
the network, serve until stopped, or change this environment (`scripts/gpu_check.sh` installs
the checkout with pip), so none runs unless it is reviewed and taught to this file. Skipped
commands, the optional choices that are not run, and the commands quoted in the prose
(`python benchmarks/benchmark.py`) are checked without running them
(`test_documented_command_parses`): the program exists, its `--help` prints a usage and lists
every option the command gives, the config files it names load with its overrides, a make
target exists, a pip extra is declared (also the one `tensorboard` comes with), a pytest marker
is registered.

This module finds the commands and holds the reviewed tables (SKIPPED, BOUNDED,
NOT_RUN_CHOICES, WRITES); test_docs_commands.py checks the extraction and the tables,
test_docs_commands_parse.py checks every command without running it, and
test_docs_commands_run.py runs those that run here.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent  # the console scripts of this environment

# Commands of the ```bash blocks that are not run here (a regex searched in the command): why.
# A command that calls anything but the console scripts and `echo` must be here.
SKIPPED = {
    r"\bmake demo\b": "the main job trains for 60 minutes (its steps, train, average and "
    "evaluate, run here as the commands below)",
    r"^make test\b": "runs this very test suite, after a pip install (network)",
    r"^torchrun\b": "needs several GPUs or nodes (NCCL)",
    r"^transformer-prepare --config configs/base\.yaml": "downloads WMT14 through datasets",
    r"--test-set\b": "downloads the test set through sacreBLEU",
    r"^scripts/gpu_check_data\.sh": "copies the newstest sets of ../shared/data (not in the "
    "setting) into gpu_data/, for a GPU machine",
    r"^bash scripts/gpu_check\.sh --out": "needs a GPU machine, and pip-installs the checkout "
    "into the environment that runs it",
    r"^PYTHON=\S+ bash scripts/gpu_check\.sh --dry-run": "takes about a minute; "
    "tests/scripts/test_gpu_check.py runs it",
    r"^tensorboard --logdir": "TensorBoard's web server runs until it is stopped",
}
# Commands that run with overrides appended, so that they take seconds instead of minutes.
BOUNDED = {
    r"^TRANSFORMER_DATA_DIR=\S+ transformer-train --config configs/multi30k\.yaml train\.": (
        "train.max_steps=1 data.valid=null"
    ),
}
# Optional choices that are not run here (their options are checked in --help): why.
NOT_RUN_CHOICES = {"--device cuda": "no GPU here"}
# Files a command writes besides those its output options name (paths in the setting).
WRITES = {
    r"^transformer-plot checkpoints/multi30k_en-de$": [
        "checkpoints/multi30k_en-de/training_curves.png"
    ],
    r"^transformer-evaluate --checkpoint avg\.pt --src \S+/newstest2014\.en": [
        "avg.newstest2014.hyp.de",
        "avg.newstest2014.json",
    ],
    r"^transformer-evaluate --checkpoint a\.pt b\.pt ": [
        "a+b.test.hyp.de",
        "a+b.test.json",
    ],
}
OUTPUT_OPTIONS = ("--output", "--json", "--hyp-out")
PROGRAMS = {"python", "make", "pip", "pytest", "torchrun", "echo", "bash", "tensorboard"}

FENCE = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.DOTALL | re.MULTILINE)
OPTIONAL = re.compile(r"\s\[(?P<choices>--[^\]]*)\]")  # `[--nbest 4 | --greedy]`
ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")  # `VAR=value` before a command
OVERRIDE = re.compile(r"^[a-z_]+\.[a-z_]+=")  # `train.max_steps=1`


@dataclasses.dataclass(frozen=True)
class Command:
    """One documented command: where it is and its text."""

    where: str  # "README.md:140"
    text: str  # one line; `[--x ...]` groups kept

    @property
    def base(self) -> str:
        """The command without its optional groups."""
        return OPTIONAL.sub("", self.text)

    @property
    def choices(self) -> list[list[str]]:
        """The choices of each optional group: `[--nbest 4 | --greedy]` -> [["--nbest 4",
        "--greedy"]]."""
        return [
            [choice.strip() for choice in match["choices"].split(" | ")]
            for match in OPTIONAL.finditer(self.text)
        ]

    def variants(self) -> list[str]:
        """The command lines to run: the base, then the first runnable choice of each group."""
        runnable = [
            next((c for c in group if c not in NOT_RUN_CHOICES), None) for group in self.choices
        ]
        extra = " ".join(choice for choice in runnable if choice)
        lines = [self.base] + ([f"{self.base} {extra}"] if extra else [])
        bound = next((v for k, v in BOUNDED.items() if re.search(k, self.text)), None)
        return [f"{line} {bound}" if bound else line for line in lines]


def strip_comment(line: str) -> str:
    """`line` without a shell comment (a `#` at a word start, outside quotes)."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index]
    return line


def block_commands(path: Path) -> list[Command]:
    """The commands of the ```bash blocks of `path`, continued lines joined."""
    text = path.read_text(encoding="utf-8")
    commands = []
    for block in FENCE.finditer(text):
        if block["lang"] != "bash":
            continue
        first = text.count("\n", 0, block.start("body")) + 1
        parts: list[str] = []
        for offset, raw in enumerate(block["body"].split("\n")):
            line = strip_comment(raw).strip()
            if not parts:
                start = first + offset
            if line.endswith("\\"):
                parts.append(line[:-1].strip())
                continue
            command = " ".join(filter(None, [*parts, line]))
            parts = []
            if command:
                commands.append(Command(f"{path.name}:{start}", command))
    return commands


@functools.cache
def console_scripts() -> dict[str, str]:
    """`[project.scripts]` of pyproject.toml: name -> "module:function"."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^([\w-]+) = "([\w.:]+)"', section, re.MULTILINE))


def without_assignments(words: list[str]) -> list[str]:
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]
    return words


def is_program(word: str) -> bool:
    return (
        word in PROGRAMS
        or word.endswith(("/python", "/pip"))
        or word in console_scripts()
        or re.fullmatch(r"(scripts|benchmarks)/[\w/]+\.(py|sh)", word) is not None
    )


def prose_commands(path: Path) -> list[Command]:
    """The commands quoted as `inline code` in the prose of `path` (not in code blocks)."""
    text = path.read_text(encoding="utf-8")
    text = FENCE.sub(lambda block: "\n" * block[0].count("\n"), text)  # keeps line numbers
    commands = []
    for span in re.finditer(r"`([^`]+)`", text):
        line = " ".join(span[1].split())
        try:
            words = without_assignments(shlex.split(line))
        except ValueError:  # not shell syntax
            continue
        if "<" not in line and words and is_program(words[0]):  # `python -m x.<name>`: a form
            where = f"{path.name}:{text.count(chr(10), 0, span.start()) + 1}"
            commands.append(Command(where, line))
    return commands


BLOCK_COMMANDS = [command for path in DOCS for command in block_commands(path)]
PROSE_COMMANDS = [command for path in DOCS for command in prose_commands(path)]


def skip_reason(command: Command) -> str | None:
    return next((why for key, why in SKIPPED.items() if re.search(key, command.text)), None)


def run_ids(command: Command) -> str:
    return f"{command.where} {command.text[:60]}"


def programs(line: str) -> list[list[str]]:
    """The words of each program of a pipeline, redirections dropped."""
    words = shlex.split(line)
    pipeline: list[list[str]] = [[]]
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
        elif word == "|":
            pipeline.append([])
        elif word in ("<", ">", "2>"):
            skip_next = True
        else:
            pipeline[-1].append(word)
    return pipeline


def runs_here(command: Command) -> bool:
    """Whether `command` runs in the setting: not skipped, and only console scripts."""
    runnable = {"echo", *console_scripts()}
    called = {without_assignments(words)[0] for words in programs(command.base)}
    return skip_reason(command) is None and called <= runnable


RUN = [command for command in BLOCK_COMMANDS if runs_here(command)]
