"""Every shell command in README.md and docs/*.md is found, and either runs here or is
skipped with a reason: the extraction of the commands (backslash-continued lines joined,
`# comments` dropped, `[--x ...]` groups), and the tables of tests/documented_commands.py,
which its module docstring describes (fast). test_docs_commands_parse.py and
test_docs_commands_run.py check and run the commands themselves.
"""

from __future__ import annotations

import re

from tests.documented_commands import (
    BLOCK_COMMANDS,
    BOUNDED,
    DOCS,
    FENCE,
    NOT_RUN_CHOICES,
    PROSE_COMMANDS,
    RUN,
    SKIPPED,
    WRITES,
    is_program,
    runs_here,
    skip_reason,
    strip_comment,
)


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
        f"{translate.base} --beam-size 4 --nbest 4 --max-tokens 4096 --linear-kernel torch",
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
