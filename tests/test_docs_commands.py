"""Every shell command in README.md and docs/*.md works as written.

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
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.util
import io
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


# ---------------------------------------------------------------------------------------------
# Checking a command without running it


@functools.cache
def help_text(invocation: tuple[str, ...]) -> str:
    """The `--help` output of a program: ("script", NAME) for a console script (called in
    this process through its pyproject.toml entry), else the argv of a Python subprocess."""
    if invocation[0] == "script":
        module, function = console_scripts()[invocation[1]].split(":")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = getattr(importlib.import_module(module), function)(["--help"])
        assert status == 0, f"{invocation[1]} --help exits {status}"
        return out.getvalue()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as in a user's shell
    result = subprocess.run(
        [*invocation, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{shlex.join(invocation)} --help exits {result.returncode}"
    return result.stdout


def parse_problems(words: list[str], extra_options: list[str]) -> list[str]:
    """What is wrong with the command `words` (one program of a pipeline), without running it;
    `extra_options` are the options of its optional groups."""
    words = without_assignments(words)
    program, args = words[0], words[1:]
    if program == "echo":
        return []
    if program == "make":
        return make_problems(args)
    if program.endswith("pip"):  # pip install [-e] .[extra]: this checkout, never an index
        extras = declared_extras()
        problems = [
            f"no extra {e!r} in pyproject.toml" for e in pip_extras(args) if e not in extras
        ]
        named = [arg for arg in args[1:] if not arg.startswith(("-", "."))]
        return problems + [f"pip install {name}: no index serves this project" for name in named]
    if program == "pytest":
        return marker_problems(args)
    if program == "tensorboard":  # installed by the `tensorboard` extra
        extra = "tensorboard" in declared_extras()
        return [] if extra else ["no extra 'tensorboard' in pyproject.toml"]
    if program == "torchrun":  # it starts `python -m MODULE ARGS` in every process
        if shutil.which("torchrun", path=str(BIN)) is None:
            return [f"no torchrun in {BIN}"]
        program, args = "python", args[args.index("-m") :]
    if program == "bash":  # bash SCRIPT ARGS
        return [] if (ROOT / args[0]).is_file() else [f"no such file: {args[0]}"]
    if program.endswith(".sh"):
        path = ROOT / program
        return [] if os.access(path, os.X_OK) else [f"{program} is not an executable file"]
    if program in console_scripts():
        invocation: tuple[str, ...] = ("script", program)
    elif program.endswith(".py"):  # run directly, as `scripts/quickstart.py --direction de-en`
        invocation = (sys.executable, program)
    elif args[:1] == ["-m"]:
        invocation, args = (sys.executable, "-m", args[1]), args[2:]
    elif args:  # python FILE
        invocation, args = (sys.executable, args[0]), args[1:]
    else:
        return []
    if invocation[0] != "script":  # --help runs only a file that parses its arguments
        source = python_source(invocation[1:])
        if source is None:
            return [f"no such file or module: {invocation[-1]}"]
        if not re.search(r"\bargparse\b|transformer\.cli\.", source.read_text("utf-8")):
            return [f"{source} takes no --help (neither argparse nor transformer.cli)"]
    shown = program if invocation[0] == "script" else re.sub(r"^.*/", "", " ".join(invocation))
    usage = help_text(invocation)
    if "usage:" not in usage:
        return [f"{shown} --help prints no usage"]
    known = set(re.findall(r"--[\w-]+", usage))
    problems = [
        f"{shown} has no option {option}"
        for option in {w.split("=")[0] for w in [*args, *extra_options] if w.startswith("--")}
        if option not in known
    ]
    return problems + config_problems(invocation, args)


def python_source(target: tuple[str, ...]) -> Path | None:
    """The file that `python FILE` or `python -m MODULE` runs (None: there is none)."""
    if target[0] != "-m":
        path = ROOT / target[0]
        return path if path.is_file() else None
    try:
        spec = importlib.util.find_spec(target[1])
        if spec is not None and spec.submodule_search_locations:  # a package: its __main__
            spec = importlib.util.find_spec(f"{target[1]}.__main__")
    except ImportError:
        return None
    return Path(spec.origin) if spec is not None and spec.origin else None


def config_problems(invocation: tuple[str, ...], args: list[str]) -> list[str]:
    """The config files named must exist, and load with the overrides given (training)."""
    from transformer.config import load_config

    configs = [arg for arg in args if arg.endswith(".yaml")]
    problems = [f"no such config file: {c}" for c in configs if not (ROOT / c).is_file()]
    trains = {"transformer-train", "transformer-prepare", "transformer.train"} & set(invocation)
    if trains and not problems:
        overrides = [arg for arg in args if OVERRIDE.match(arg)]
        for config in configs:
            try:
                load_config(ROOT / config, overrides)
            except (OSError, ValueError) as error:
                problems.append(f"{config} {overrides}: {error}")
    return problems


def make_problems(args: list[str]) -> list[str]:
    """Each target exists; `VAR=value` passes options to the script its recipe runs."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = [arg for arg in args if not ASSIGNMENT.match(arg)]
    problems = [f"no make target {t!r}" for t in targets if f"\n{t}:" not in makefile]
    for arg in args:
        if ASSIGNMENT.match(arg):
            name, value = arg.split("=", 1)
            script = re.search(rf"(\S+\.py) \$\({name}\)", makefile)
            if script is None:
                problems.append(f"no recipe of the Makefile passes $({name}) to a script")
            else:
                problems += parse_problems(["python", script[1], *shlex.split(value)], [])
    return problems


def declared_extras() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^(\w+) = \[", section, re.MULTILINE))


def pip_extras(args: list[str]) -> list[str]:
    return [name for arg in args for name in re.findall(r"\.\[([\w,]+)\]", arg)]


def marker_problems(args: list[str]) -> list[str]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    markers = set(re.findall(r'^\s+"(\w+):', text, re.MULTILINE))
    expression = args[args.index("-m") + 1] if "-m" in args else ""
    named = set(re.findall(r"\w+", expression)) - {"not", "and", "or"}
    return [f"no pytest marker {m!r} in pyproject.toml" for m in sorted(named - markers)]


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


@pytest.mark.slow
@pytest.mark.parametrize("command", BLOCK_COMMANDS + PROSE_COMMANDS, ids=run_ids)
def test_documented_command_parses(command):
    """The program, its options and the files it names exist (for every command, run or not)."""
    extra = [word for group in command.choices for c in group for word in shlex.split(c)]
    pipeline = programs(command.base)
    problems = []
    for index, words in enumerate(pipeline):
        problems += parse_problems(words, extra if index == len(pipeline) - 1 else [])
    assert not problems, f"{command.where}: {command.text}\n" + "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# Running the commands


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


def runs_here(command: Command) -> bool:
    """Whether `command` runs in the setting: not skipped, and only console scripts."""
    runnable = {"echo", *console_scripts()}
    called = {without_assignments(words)[0] for words in programs(command.base)}
    return skip_reason(command) is None and called <= runnable


RUN = [command for command in BLOCK_COMMANDS if runs_here(command)]


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


# ---------------------------------------------------------------------------------------------
# The extraction itself (fast)


def test_the_commands_are_found_joined_and_stripped_of_comments():
    texts = [command.text for command in BLOCK_COMMANDS]
    assert (
        "TRANSFORMER_DATA_DIR=../shared/data transformer-train --config configs/multi30k.yaml "
        "train.output_dir=checkpoints/my_run train.max_minutes=30 model.dropout=0.2"
    ) in texts
    assert 'echo "A man is riding a horse." | transformer-translate --checkpoint avg.pt' in texts
    translate = next(c for c in BLOCK_COMMANDS if "--input test.en" in c.text)
    assert translate.text.endswith("[--linear-kernel torch]")  # the comment is gone
    assert translate.variants() == [
        translate.base,
        f"{translate.base} --nbest 4 --max-tokens 4096 --linear-kernel torch",
    ]
    assert any(c.where.startswith("attention.md:") for c in BLOCK_COMMANDS)
    assert "python benchmarks/benchmark.py" in [c.text for c in PROSE_COMMANDS]
    assert strip_comment('echo "a # b" # c') == 'echo "a # b" '


def test_every_block_command_runs_or_is_skipped_with_a_reason():
    """A new command of another program is never run unreviewed: it fails here until it is
    in SKIPPED (or this file learns to run it)."""
    unclassified = [
        f"{c.where}: {c.text}"
        for c in BLOCK_COMMANDS
        if not runs_here(c) and skip_reason(c) is None
    ]
    assert not unclassified, "add to SKIPPED, with the reason:\n" + "\n".join(unclassified)


def test_every_skip_bound_and_write_entry_names_a_documented_command():
    """No stale entries: each key of SKIPPED, BOUNDED and WRITES matches a block command."""
    for key in [*SKIPPED, *BOUNDED, *WRITES]:
        assert any(re.search(key, c.text) for c in BLOCK_COMMANDS), key
    choices = {
        choice for command in BLOCK_COMMANDS for group in command.choices for choice in group
    }
    assert set(NOT_RUN_CHOICES) <= choices
    assert len(RUN) >= 10


def test_shell_commands_are_in_bash_blocks():
    """A command in an indented or unlabelled block would escape these tests."""
    problems = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for block in FENCE.finditer(text):
            if block["lang"] not in ("bash", "python", "yaml", "json"):
                problems += [
                    f"{path.name}: ```{block['lang']} block: {line}"
                    for line in block["body"].splitlines()
                    if line.split()[:1] and is_program(line.split()[0])
                ]
        outside = FENCE.sub("", text)
        problems += [
            f"{path.name}: indented command: {line.strip()}"
            for line in outside.splitlines()
            if line.startswith("    ") and line.split() and is_program(line.split()[0])
        ]
    assert not problems, "\n".join(problems)
