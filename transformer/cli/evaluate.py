"""`transformer-evaluate`: translate a test set and score it (sacreBLEU and the paper's BLEU).

    # local files (works offline; the shared data has newstest2014 and Multi30k)
    transformer-evaluate --checkpoint ckpt.pt --src newstest2014.en --ref newstest2014.de
    # a sacreBLEU test set, downloaded by sacreBLEU (needs network access the first time)
    transformer-evaluate --checkpoint ckpt.pt --test-set wmt14/full --langpair en-de
    # an ensemble of checkpoints (their mean probability, as transformer-translate decodes it)
    transformer-evaluate --checkpoint a.pt b.pt --src test.en --ref test.de
    # score an existing hypothesis file, no checkpoint needed
    transformer-evaluate --hyp hyp.de --ref newstest2014.de
    # sampled translations, as transformer-translate samples them with the same options
    transformer-evaluate --checkpoint ckpt.pt --src test.en --ref test.de --sampling --seed 1

Prints three labelled scores (see `transformer.evaluate.bleu`): sacreBLEU BLEU and chrF with their
signatures, and the tokenized BLEU with compound splitting that the paper's 27.3 / 28.4 measure.
Writes the detokenized hypotheses and a JSON file with every score, the signatures and the
decoding settings: by default next to the checkpoint as `<checkpoint>.<test>.hyp.<lang>` (the
checkpoint's `data.target_lang`, e.g. `avg.newstest2014.hyp.de`) and `<checkpoint>.<test>.json`
(an ensemble: its members' names joined by "+", `a+b.<test>...`, next to the first, so that
two ensembles never share a file; `transformer.cli.evaluate_outputs`);
`--output-dir` (created when missing), `--hyp-out` and `--json` (whose directories must exist)
choose other places. Both are written atomically (`transformer.atomic`). `--checkpoint` may name
a run directory: its `checkpoint_best.pt`, else `checkpoint_last.pt` (named on stderr); several
checkpoints decode as an ensemble (`transformer.decode.ensemble`; one vocabulary).
The search and sampling options are transformer-translate's (`transformer.cli.decode_options`;
not its output options such as --nbest): the same options give the same hypotheses, sampled
ones included (`--sampling`; without `--seed` a seed is drawn at random and written in the
JSON, so that the same samples can be drawn again). The JSON's "checkpoints" lists the models
(one, then also its "checkpoint", or an ensemble's members).
Exit status: the rule of `transformer.cli.common` (0 ok, 2 wrong command line, 1 the work could
not be done, 130 interrupted).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import secrets
import sys
import time
from pathlib import Path

from transformer.atomic import atomic_write_text
from transformer.cli.common import (
    UsageError,
    checkpoint_file,
    device_option,
    one_line,
    run,
)
from transformer.cli.decode_options import (
    add_decoding_arguments,
    decoding_config,
    warn_capped_lines,
)
from transformer.cli.evaluate_outputs import check_outputs, output_paths
from transformer.cli.values import file_name
from transformer.data.corpus import read_lines
from transformer.evaluate.bleu import corpus_scores, format_scores
from transformer.evaluate.sacrebleu_sets import fetch_test_set

PROG = "transformer-evaluate"


def check_line_counts(hyp_or_src: Path, lines: list[str], refs: dict[Path, list[str]]) -> None:
    """Raise ValueError unless every reference file has as many lines as `hyp_or_src`, and
    they are not empty (sacreBLEU cannot score an empty corpus)."""
    for path, ref_lines in refs.items():
        if len(ref_lines) != len(lines):
            raise ValueError(
                f"line count mismatch: {hyp_or_src} has {len(lines)} lines but {path} has "
                f"{len(ref_lines)}; they must correspond line by line"
            )
    if not lines:
        raise ValueError(f"nothing to score: {hyp_or_src} is empty")


def _target_lang(args: argparse.Namespace, ref_paths: list[Path]) -> str:
    """--target-lang, else the langpair's target, else the reference file's suffix ("x.de")."""
    if args.target_lang:
        return args.target_lang
    if args.langpair:
        return args.langpair.split("-")[-1]
    suffix = ref_paths[0].suffix.lstrip(".")
    return suffix if suffix.isalpha() and 2 <= len(suffix) <= 3 else ""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Translate a test set with a checkpoint (or take --hyp) and report "
        "sacreBLEU BLEU, chrF and the paper's tokenized compound-split BLEU.",
    )
    parser.add_argument(
        "--checkpoint",
        type=file_name,
        nargs="+",
        action="extend",  # `--checkpoint a.pt --checkpoint b.pt`: both, an ensemble
        help="checkpoint to translate with, or a run directory (its checkpoint_best.pt, "
        "else checkpoint_last.pt); several: an ensemble",
    )
    parser.add_argument("--src", type=file_name, help="source file, one sentence a line")
    parser.add_argument(
        "--ref", type=file_name, help="reference file, line-aligned with --src / --hyp"
    )
    parser.add_argument("--test-set", help="a sacreBLEU test set instead of --src/--ref")
    parser.add_argument("--langpair", help="language pair of --test-set, e.g. en-de")
    parser.add_argument(
        "--hyp", type=file_name, help="score this hypothesis file instead of translating"
    )
    parser.add_argument("--target-lang", help="target language code for sacreBLEU")
    parser.add_argument(
        "--output-dir",
        type=file_name,
        help="directory for the hypotheses and JSON, created if missing "
        "(default: the checkpoint's directory)",
    )
    parser.add_argument(
        "--hyp-out", type=file_name, help="hypothesis file to write (overrides --output-dir)"
    )
    parser.add_argument(
        "--json", type=file_name, help="JSON file to write (overrides --output-dir)"
    )
    add_decoding_arguments(parser)  # the search and sampling options, as transformer-translate's
    return parser


def _check_arguments(args: argparse.Namespace) -> None:
    """Raise UsageError for a combination of options that does not name one job."""
    if args.hyp and (args.checkpoint or args.src):
        raise UsageError("--hyp scores an existing file; do not combine it with --checkpoint/--src")
    if not args.hyp and not args.checkpoint:
        raise UsageError("give --checkpoint (to translate) or --hyp (to score an existing file)")
    if args.test_set and (args.src or args.ref):
        raise UsageError("--test-set replaces --src/--ref; give one or the other")
    if args.test_set and not args.langpair:
        raise UsageError("--test-set needs --langpair, e.g. --langpair en-de")
    if not args.test_set and not args.ref:
        raise UsageError("give --ref FILE (or --test-set NAME --langpair xx-yy)")
    if not args.test_set and not args.hyp and not args.src:
        raise UsageError("give --src FILE with --checkpoint (or --test-set NAME --langpair xx-yy)")


def main(argv: list[str] | None = None) -> int:
    """Entry point of `transformer-evaluate` (see the module docstring).

    Returns:
        The exit status, by the rule of `transformer.cli.common`: 0 on success; 2 for a wrong
        command line (options that do not name one job, a decoding option out of range,
        `--greedy` with `--sampling` or `--beam-size`, a sampling option without it, an
        unknown `--device`);
        1 after a one-line error when the work cannot be done (missing or mismatched files,
        a bad checkpoint or a `--checkpoint` directory without one, ensemble members with
        different vocabularies or directions, an unreachable sacreBLEU test set, an output
        that would overwrite an input or whose directory does not exist).
    """
    return run(build_parser(), _evaluate, argv)


def _evaluate(args: argparse.Namespace) -> None:
    """Translate (unless --hyp), score, print and write, as `args` asks."""
    _check_arguments(args)
    decoding_config(args)  # the decoding options alone, before anything is read
    device = device_option(args.device) if not args.hyp else None
    checkpoints = [checkpoint_file(path, PROG) for path in args.checkpoint or []]
    for checkpoint in checkpoints:  # before the outputs named after the first
        if not checkpoint.is_file():
            raise FileNotFoundError(f"checkpoint not found: {checkpoint}")
    if args.test_set:
        src_path, ref_paths = fetch_test_set(args.test_set, args.langpair)
        test_name = f"{args.test_set.replace('/', '_')}.{args.langpair}"
    else:
        src_path = Path(args.src) if args.src else None
        ref_paths = [Path(args.ref)]
        test_name = src_path.stem if src_path else Path(args.ref).stem
    inputs = [args.hyp, *checkpoints, src_path, *ref_paths]
    hyp_out, json_out = output_paths(args, checkpoints, test_name, target_lang=None)
    check_outputs(args, [(hyp_out, "--hyp-out"), (json_out, "--json")], inputs)
    refs = {path: read_lines(path) for path in ref_paths}
    target_lang = _target_lang(args, ref_paths)
    report: dict = {"target_lang": target_lang, "ref": [str(p) for p in ref_paths]}
    if args.test_set:
        report.update(test_set=args.test_set, langpair=args.langpair)

    if args.hyp:
        hyps = read_lines(args.hyp)
        check_line_counts(Path(args.hyp), hyps, refs)
        report["hyp"] = str(args.hyp)
    else:
        from transformer.decode.translator import Translator

        src_lines = read_lines(src_path)
        check_line_counts(src_path, src_lines, refs)
        if len(checkpoints) > 1:
            translator = Translator.from_checkpoints(
                checkpoints, device=device, linear_kernel=args.linear_kernel
            )
        else:
            translator = Translator.from_checkpoint(
                checkpoints[0], device=device, linear_kernel=args.linear_kernel
            )
        # The default hypothesis file is named after the language the checkpoint produces.
        hyp_out, json_out = output_paths(
            args, checkpoints, test_name, translator.config.data.target_lang
        )
        check_outputs(args, [(hyp_out, "--hyp-out"), (json_out, "--json")], inputs)
        decode = decoding_config(args, translator.config.decode)
        if decode.sampling and decode.seed is None:  # drawn here, so the report can give it
            decode = dataclasses.replace(decode, seed=secrets.randbelow(2**63))
        settings = dict(dataclasses.asdict(decode), greedy=args.greedy)
        warn_capped_lines(PROG, translator, src_lines, settings)
        start = time.perf_counter()
        hyps = translator.translate(src_lines, progress=True, **settings)
        seconds = time.perf_counter() - start
        hyps = [one_line(h) for h in hyps]
        report["checkpoints"] = [str(path) for path in checkpoints]  # one or an ensemble
        if len(checkpoints) == 1:
            report["checkpoint"] = str(checkpoints[0])
        report.update(
            src=str(src_path),
            decoding=dict(settings, device=str(device)),
            translation_seconds=round(seconds, 3),
            sentences_per_second=round(len(hyps) / seconds, 3) if seconds > 0 else None,
        )

    scores = corpus_scores(hyps, list(refs.values()), target_lang=target_lang)
    report["scores"] = scores
    print(format_scores(scores))
    if args.output_dir is not None:
        Path(args.output_dir).mkdir(parents=True, exist_ok=True)
    if hyp_out is not None:
        atomic_write_text(hyp_out, "".join(h + "\n" for h in hyps))
        report["hyp"] = str(hyp_out)
        print(f"hypotheses written to {hyp_out}", file=sys.stderr)
    if json_out is not None:
        atomic_write_text(json_out, json.dumps(report, indent=2) + "\n")
        print(f"scores written to {json_out}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
