"""`transformer-export`: a checkpoint as a CTranslate2 or Hugging Face model, parity checked.

    transformer-export --checkpoint avg.pt --to ctranslate2 --output m30k-ct2
    transformer-export --checkpoint avg.pt --to ctranslate2 --quantization int8 --output m30k-int8
    transformer-export --checkpoint avg.pt --to huggingface --output m30k-hf \\
        --check-input ../shared/data/multi30k/test_2016_flickr.en

The model is written into a staging directory beside `--output`, run beside our decoder on the
check sentences (`--check`, on by default: a few built-in sentences, or `--check-input FILE`),
and moved to `--output` only when every comparison passed; a failed check leaves nothing there
and exits 1 naming the comparison that failed. The criteria (`transformer.export.*_parity`):

- ctranslate2, float32: greedy and beam-search outputs (length penalty |Y|^alpha, CTranslate2's
  convention, our `length_penalty_style: power`) token-identical on >= `--min-identical` of the
  sentences; a quantized export also checks a float32 twin so, then its own BLEU: within
  `--max-bleu-drop` of ours with `--check-reference`, else against our outputs;
- huggingface: the tokenizer's ids identical, teacher-forced logits within 1e-4 in padded
  batches, greedy `generate` token-identical on >= `--min-identical`.

One report line per comparison goes to stdout, and into `export.json` in the output with the
settings. Needs the `export` extra (`pip install -e ".[export]"`); without it the command
exits 1 with one line naming it. Exit status: the rule of `transformer.cli.common`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from transformer.checkpoint import load_checkpoint
from transformer.cli.common import UsageError, checkpoint_file, run
from transformer.cli.values import file_name, integer, number
from transformer.data.corpus import read_lines
from transformer.export.ctranslate2 import QUANTIZATIONS, export_ctranslate2
from transformer.export.ctranslate2_parity import check_ctranslate2
from transformer.export.extra import MissingExtraError, import_extra
from transformer.export.huggingface import check_exportable, export_huggingface
from transformer.export.huggingface_parity import check_huggingface
from transformer.export.parity import CHECK_SENTENCES

TARGETS = ("ctranslate2", "huggingface")


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="transformer-export",
        description="Export a checkpoint to CTranslate2 or Hugging Face, with a parity check.",
    )
    parser.add_argument("--checkpoint", required=True, type=file_name, help="checkpoint or run dir")
    parser.add_argument("--to", required=True, choices=TARGETS, help="the engine to export to")
    parser.add_argument("--output", required=True, type=file_name, help="model directory to write")
    parser.add_argument(
        "--quantization", choices=QUANTIZATIONS, help="ctranslate2 weight type (default float32)"
    )
    parser.add_argument("--force", action="store_true", help="replace an existing --output")
    check = parser.add_argument_group("parity check")
    check.add_argument(
        "--check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the exported model beside ours and refuse a mismatch (default: on)",
    )
    check.add_argument("--check-input", type=file_name, help="source sentences, one a line")
    check.add_argument("--check-reference", type=file_name, help="their references (BLEU)")
    check.add_argument("--beam-size", type=integer, default=4, help="beams of the beam check (4)")
    check.add_argument(
        "--length-penalty", type=number, help="alpha of |Y|^alpha (default: the checkpoint's)"
    )
    check.add_argument(
        "--min-identical", type=number, default=0.99, help="share of identical outputs (0.99)"
    )
    check.add_argument(
        "--max-bleu-drop", type=number, default=0.5, help="quantized BLEU loss allowed (0.5)"
    )
    check.add_argument("--threads", type=integer, default=1, help="CTranslate2 threads (1)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `transformer-export`; returns the exit status.

    Returns:
        0 when the export was written (and, with `--check`, passed); 2 for a wrong command line
        (`--quantization` with `--to huggingface`, `--check-reference` without
        `--check-input`, a value out of range); 1 after a one-line error when the work cannot
        be done (a bad checkpoint, an unreadable check file, an existing `--output` without
        `--force`, a model the engine cannot hold, a missing `export` extra, a failed parity
        check).
    """
    return run(build_parser(), _export_command, argv)


def _check_arguments(args: argparse.Namespace) -> None:
    if args.quantization and args.to != "ctranslate2":
        raise UsageError("--quantization applies to --to ctranslate2 only")
    if args.check_reference and not args.check_input:
        raise UsageError("--check-reference needs --check-input")
    if not args.check and (args.check_input or args.check_reference):
        raise UsageError("--check-input and --check-reference need --check")
    if args.beam_size < 1 or args.threads < 1:
        raise UsageError("--beam-size and --threads must be at least 1")
    if not 0.0 <= args.min_identical <= 1.0:
        raise UsageError(f"--min-identical ({args.min_identical}) must be in [0, 1]")
    if args.length_penalty is not None and not 0.0 <= args.length_penalty <= 10.0:
        raise UsageError(f"--length-penalty ({args.length_penalty}) must be in [0, 10]")
    if not args.max_bleu_drop >= 0:  # nan too
        raise UsageError(f"--max-bleu-drop ({args.max_bleu_drop}) must be >= 0")


def _export_command(args: argparse.Namespace) -> None:
    _check_arguments(args)
    try:
        _export(args)
    except MissingExtraError as error:
        raise ValueError(str(error)) from None


def _export(args: argparse.Namespace) -> None:
    """Export, check in a staging directory, then move it to `--output`."""
    output = Path(args.output)
    path = checkpoint_file(args.checkpoint, "transformer-export")
    read = {"the checkpoint": path, "--check-input": args.check_input}
    _check_output(output, args.force, read | {"--check-reference": args.check_reference})
    sentences, references = list(CHECK_SENTENCES), None
    if args.check_input:
        sentences = read_lines(args.check_input)
        if not any(line.strip() for line in sentences):
            raise ValueError(f"--check-input {args.check_input} has no sentence (empty or blank)")
    if args.check_reference:
        references = read_lines(args.check_reference)
        if len(references) != len(sentences):
            raise ValueError(
                f"--check-reference has {len(references)} lines, --check-input {len(sentences)}"
            )
    model, tokenizer, config = load_checkpoint(path)
    model.float()
    decode = config.decode
    alpha = decode.length_penalty if args.length_penalty is None else args.length_penalty
    settings = dict(max_len_a=decode.max_len_a, max_len_b=decode.max_len_b)
    if args.to == "huggingface":
        check_exportable(model, tokenizer)  # before any work
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.partial-", dir=output.parent))
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # mkdtemp makes it owner-only; a model folder is readable
    try:
        results = []
        if args.to == "ctranslate2":
            export_ctranslate2(model, tokenizer, staging, args.quantization)
            if args.check:
                results = _check_ctranslate2(
                    args, model, tokenizer, config, staging, sentences, references, alpha, settings
                )
        else:
            with _without_progress_bars():
                export_huggingface(model, tokenizer, staging)
                if args.check:
                    results = check_huggingface(
                        model,
                        tokenizer,
                        staging,
                        sentences,
                        min_identical=args.min_identical,
                        **settings,
                    )
        for result in results:
            print(result.line())
        failed = [result for result in results if not result.passed]
        if failed:
            hint = ""
            if args.quantization and references is None:
                hint = " (give --check-input FILE --check-reference FILE to judge it by BLEU)"
            raise ValueError(f"parity check failed, nothing written: {failed[0].line()}{hint}")
        _write_report(staging, args, path, results, alpha, settings)
        if output.exists():
            shutil.rmtree(output) if output.is_dir() else output.unlink()
        staging.rename(output)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    checked = "parity checked" if args.check else "parity NOT checked (--no-check)"
    print(f"exported {path} -> {output} ({args.to}, {checked})")


def _check_output(output: Path, force: bool, inputs: dict[str, str | None]) -> None:
    """Refuse an `--output` that cannot be written, or whose replacing (`--force` deletes it
    at the end, after the check) would delete a file the command reads or the directory it
    runs in (`--output .` once emptied the current directory)."""
    if output.is_symlink():
        raise ValueError(f"--output {output} is a symbolic link; give the folder itself")
    if not output.parent.is_dir():
        problem = f"{output.parent} is not a directory"
        if not output.parent.exists():
            problem = f"the directory {output.parent} does not exist"
        raise ValueError(f"--output {output}: {problem}")
    if not output.exists():
        return
    real = Path(os.path.realpath(output))
    held = {"the current directory": os.getcwd(), **inputs}
    for name, path in held.items():
        if path is not None and Path(os.path.realpath(path)).is_relative_to(real):
            raise ValueError(f"--output {output} holds {name} ({path}); choose another folder")
    if not force:
        raise ValueError(f"--output {output} exists; pass --force to replace it")


@contextlib.contextmanager
def _without_progress_bars():
    """Turn transformers' progress bars off ("Loading weights: 100%|...") while it runs.

    The command prints one line per check; the library's bars on stderr would come between
    them. Its setting is restored afterwards, for callers of `main` in Python.
    """
    logging = import_extra("transformers").utils.logging
    shown = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            logging.enable_progress_bar()


def _check_ctranslate2(
    args, model, tokenizer, config, staging, sentences, references, alpha, settings
):
    """Float32: check `staging` token by token. Quantized: check a float32 twin so, then
    `staging` by BLEU."""
    common = dict(
        beam_size=args.beam_size,
        length_penalty=alpha,
        threads=args.threads,
        min_identical=args.min_identical,
        **settings,
    )
    if args.quantization is None:
        return check_ctranslate2(model, tokenizer, staging, sentences, **common)
    with tempfile.TemporaryDirectory() as twin:
        export_ctranslate2(model, tokenizer, Path(twin) / "float32")
        results = check_ctranslate2(model, tokenizer, Path(twin) / "float32", sentences, **common)
    return results + check_ctranslate2(
        model,
        tokenizer,
        staging,
        sentences,
        quantization=args.quantization,
        references=references,
        max_bleu_drop=args.max_bleu_drop,
        target_lang=config.data.target_lang,
        **common,
    )


def _write_report(staging: Path, args, checkpoint: Path, results, alpha, settings) -> None:
    """`export.json`: what was exported, how it was checked, and the report."""
    report = {
        "checkpoint": str(checkpoint),
        "to": args.to,
        "quantization": args.quantization,
        "checked": args.check,
        "check_input": args.check_input or "built-in sentences",
        "decoding": {
            "beam_size": args.beam_size,
            "length_penalty": alpha,
            "length_penalty_style": "power",
            **settings,
        },
        "parity": [dataclasses.asdict(result) for result in results],
        "report": [result.line() for result in results],
    }
    (staging / "export.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
