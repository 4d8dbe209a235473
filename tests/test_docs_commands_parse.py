"""Every shell command in README.md and docs/*.md, run here or not, is checked without
running it: the program exists, its `--help` prints a usage and lists every option the
command gives (its optional `[--x ...]` choices too), the config files it names load with
its overrides, a make target exists, a pip extra is declared (also the one `tensorboard`
comes with), a pytest marker is registered. The commands quoted in the prose
(`python benchmarks/benchmark.py`) are checked too. The commands are found by
tests/documented_commands.py.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.documented_commands import (
    ASSIGNMENT,
    BIN,
    BLOCK_COMMANDS,
    OVERRIDE,
    PROSE_COMMANDS,
    ROOT,
    console_scripts,
    programs,
    run_ids,
    without_assignments,
)


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
    if args[:2] == ["-m", "transformer"] and len(args) > 2:  # its console script, by name
        program, args = f"transformer-{args[2]}", args[3:]
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
