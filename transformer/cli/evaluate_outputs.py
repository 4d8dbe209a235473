"""Where `transformer-evaluate` writes: the default file names and the checks before any work.

By default the hypotheses and the JSON report go next to the (first) checkpoint, or into
`--output-dir`: `<checkpoint>.<test>.hyp.<target_lang>` and `<checkpoint>.<test>.json`; an
ensemble is named after all its members (`ensemble_stem`). `--hyp-out` and `--json` name the
files themselves. Every output is checked before anything is read or translated
(`transformer.cli.common.check_output_path`).
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from transformer.cli.common import check_distinct_outputs, check_output_path

# The longest default file stem taken from the members' names (bytes): room for the test set's
# name and the suffixes within a file name's 255 bytes.
MAX_STEM = 120


def output_paths(
    args: argparse.Namespace, checkpoints: list[Path], test_name: str, target_lang: str | None
) -> tuple[Path | None, Path | None]:
    """Where the hypotheses and the JSON go (None: not written, or not known yet).

    Args:
        args: transformer-evaluate's options (`hyp`, `output_dir`, `hyp_out`, `json`).
        checkpoints: The checkpoint files (several: an ensemble); unused with `--hyp`.
        test_name: The test set's part of the default names (`newstest2014`).
        target_lang: The checkpoint's `data.target_lang`, the default hypothesis file's
            suffix: None before the checkpoint is loaded (that file is not known yet).

    Returns:
        (hypothesis file, JSON file): `<dir>/<stem>.<test>.hyp.<target_lang>` and
        `<dir>/<stem>.<test>.json` (`ensemble_stem`) unless `--hyp-out` / `--json` name them.
    """
    if args.hyp:
        directory = Path(args.output_dir) if args.output_dir else None
        stem = f"{Path(args.hyp).name}"
    else:
        first = checkpoints[0]
        directory = Path(args.output_dir) if args.output_dir else first.parent
        stem = f"{ensemble_stem(checkpoints)}.{test_name}"
    hyp_out = Path(args.hyp_out) if args.hyp_out else None
    json_out = Path(args.json) if args.json else None
    if directory is not None:
        if hyp_out is None and not args.hyp and target_lang is not None:
            hyp_out = directory / f"{stem}.hyp.{target_lang}"
        json_out = json_out or directory / f"{stem}.json"
    return hyp_out, json_out


def ensemble_stem(checkpoints: list[Path]) -> str:
    """The default file stem of a checkpoint (its name) or of an ensemble (one or more paths;
    returns the stem, at most `MAX_STEM` bytes for an ensemble).

    An ensemble of checkpoints in one directory is named after all of them, joined by "+"
    (`a+b`): readable, and two ensembles that share the first member do not overwrite each
    other's files. Where names alone could collide (a member in another directory, a name with
    "+" in it) or the stem would pass `MAX_STEM` bytes: `<first>+<N>more-<8 hex digits>`, the
    digits of the SHA-1 of the members' full paths in order.
    """
    first = checkpoints[0]
    if len(checkpoints) == 1:
        return first.stem
    names = [member.stem for member in checkpoints]
    stem = "+".join(names)
    home = first.parent.resolve()
    if (
        all(member.parent.resolve() == home for member in checkpoints)
        and not any("+" in name for name in names)
        and len(stem.encode()) <= MAX_STEM
    ):
        return stem
    paths = "\n".join(str(member.resolve()) for member in checkpoints)
    digest = hashlib.sha1(paths.encode(), usedforsecurity=False).hexdigest()[:8]
    start = first.stem.encode()[: MAX_STEM // 2].decode(errors="ignore")  # whole characters
    return f"{start}+{len(checkpoints) - 1}more-{digest}"


def check_outputs(args: argparse.Namespace, outputs: list, inputs: list) -> None:
    """Check the outputs before any work: `check_distinct_outputs`, then `check_output_path`.

    Args:
        args: transformer-evaluate's options; a file in `--output-dir` (not named by its own
            option) may lie in a directory still to be made, and its messages name the option
            the user gave (`--output-dir`, or "the default output" next to the checkpoint).
        outputs: (path or None, option) pairs, as `output_paths` gives them.
        inputs: The command's input files (none may be overwritten).

    Raises:
        UsageError: two outputs naming one file. ValueError: `--output-dir` is a file, or an
            output `check_output_path` refuses.
    """
    check_distinct_outputs(outputs)
    if args.output_dir is not None and Path(args.output_dir).exists():
        if not Path(args.output_dir).is_dir():
            raise ValueError(f"--output-dir {args.output_dir} is a file, not a directory")
    named = {"--hyp-out": args.hyp_out, "--json": args.json}
    for path, flag in outputs:
        if path is not None:
            in_output_dir = args.output_dir is not None and named[flag] is None
            if named[flag] is not None:  # the messages name the option the user gave
                option = flag
            else:  # a default file: in --output-dir, or next to the checkpoint
                option = "--output-dir" if in_output_dir else "the default output"
            check_output_path(path, inputs, option, creates_directory=in_output_dir)
