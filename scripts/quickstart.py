"""The main job: train on Multi30k, average checkpoints, choose the average and the beam size on
the validation set, decode test_2016_flickr with them, score BLEU.

    TRANSFORMER_DATA_DIR=../shared/data python scripts/quickstart.py            # EN->DE
    python scripts/quickstart.py --direction de-en                               # DE->EN
    python scripts/quickstart.py --max-minutes 5 train.max_steps=200             # a short try

Steps (each the project's own command, as a subprocess: what you see is what the CLI gives):

1. find Multi30k in `$TRANSFORMER_DATA_DIR/multi30k` (train/val/test_2016_flickr .en/.de), or
   download the Hugging Face dataset `bentrevett/multi30k` into `data/multi30k` (offline, one
   line says what to do instead; `transformer/data/multi30k.py`);
2. `transformer-train --config configs/multi30k.yaml` on the GPU when present; on a CPU one
   process per core with one thread each, under torchrun (`transformer/cli/torchrun.py`,
   `transformer/cpu/processes.py`; `--processes N` to choose);
3. `transformer-average --last N` over the run's last 5 and last 10 checkpoints (the last one
   itself, and checkpoint_ema.pt where `train.ema_decay` kept one, are candidates too);
4. `transformer-evaluate` on the validation set with each candidate at beam 4 and 6 (alpha 2.5,
   the config's), then on test_2016_flickr with the best pair (`scripts/validation_choice.py`);
5. print a results table and write `results/multi30k_<src>-<tgt>.json`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as `python scripts/quickstart.py`: import from the repo root
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [str(_HERE.parent), *(p for p in sys.path if p != str(_HERE))]

import yaml  # noqa: E402

from scripts.step import INTERRUPTED, run, training_command  # noqa: E402
from transformer.atomic import atomic_write_text  # noqa: E402
from transformer.cli.launch import interrupted, recorded_signals  # noqa: E402
from transformer.cli.torchrun import too_many_processes  # noqa: E402
from transformer.cli.values import integer, number  # noqa: E402
from transformer.cpu.processes import cpu_processes  # noqa: E402
from transformer.data.corpus import resolve_prefix  # noqa: E402
from transformer.data.multi30k import find_multi30k  # noqa: E402
from transformer.data.tokenizer import usable_cores  # noqa: E402
from transformer.train.metrics_log import MetricsLog  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CHECKPOINTS = REPO / "checkpoints"  # run directories, unless --run-dir names one


def torch_sees_a_gpu() -> bool:
    """Whether torch finds a CUDA device (imported here: the other steps do not need torch)."""
    import torch

    return torch.cuda.is_available()


def decoding_problem(config, args, overrides: list[str], src: str, tgt: str) -> str | None:
    """What would stop the averaging, the choice on validation or the test decoding at the end
    of the hour, found before it (one line), or None."""
    weights = len(args.average_last) + (config.train.ema_decay is not None)  # + checkpoint_ema.pt
    choosing = weights * len(args.beam_sizes) > 1
    if any(o.startswith("decode.beam_size=") for o in overrides):
        problem = "decode.beam_size: the job chooses among --beam-sizes (4,6): give those"
    elif max(args.beam_sizes) > config.data.vocab_size:
        problem = f"--beam-sizes: {max(args.beam_sizes)} beams exceed data.vocab_size "
        problem += f"({config.data.vocab_size})"
    elif config.train.keep_last < 1:
        problem = f"train.keep_last ({config.train.keep_last}) must be at least 1: the job averages"
    elif not config.data.test:
        problem = "data.test is empty: the job scores a test set"
    elif choosing and not config.data.valid:
        problem = "data.valid is empty: the choice is made on it (--average-last N --beam-sizes K"
        problem += ", train.ema_decay=null)" if config.train.ema_decay is not None else ")"
    else:
        problem = None
    for key, setting in (("data.test", config.data.test), ("data.valid", config.data.valid)):
        for lang in (src, tgt) if setting and not problem else ():
            if not Path(f"{resolve_prefix(setting)}.{lang}").is_file():
                return f"file not found: {resolve_prefix(setting)}.{lang} ({key}={setting})"
    return problem


def main(argv: list[str] | None = None) -> int:
    """Run the whole job; returns 0 on success, 1 when a step fails, 2 for a wrong command line
    or config, 130 after Ctrl-C (143 after SIGTERM): one line, no traceback."""
    try:
        return _job(argv)
    except KeyboardInterrupt:
        print("quickstart: interrupted; rerun the same command to resume", file=sys.stderr)
        return INTERRUPTED


def _job(argv: list[str] | None) -> int:
    """The steps of the module docstring (see `main`)."""
    with recorded_signals() as received:  # torch loads here, not at the top: a Ctrl-C or
        from scripts import validation_choice  # SIGTERM meanwhile is one line, as for every
        from transformer.cli.common import one_line  # command (torch's C code cannot drop it)
        from transformer.config import load_config
    if received:
        return interrupted("quickstart", received[0])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--direction", default="en-de", choices=["en-de", "de-en"])
    parser.add_argument("--config", default=str(REPO / "configs" / "multi30k.yaml"))
    parser.add_argument("--max-minutes", type=number, help="override train.max_minutes")
    parser.add_argument(
        "--average-last",
        default=",".join(map(str, validation_choice.AVERAGE_LAST)),
        help="how many of the last checkpoints to average, one or several to choose from on "
        "the validation set; 1: the last checkpoint itself (5,10,1)",
    )
    parser.add_argument(
        "--beam-sizes",
        default=",".join(map(str, validation_choice.BEAM_SIZES)),
        help="beam sizes to choose from on the validation set (4,6)",
    )
    parser.add_argument("--download-dir", default=str(REPO / "data" / "multi30k"))
    parser.add_argument("--fresh", action="store_true", help="retrain even if the run exists")
    parser.add_argument(
        "--processes",
        type=integer,
        help="training processes (default: 1 on a GPU; on a CPU one per core, one thread each)",
    )
    parser.add_argument(
        "--run-dir", help="checkpoints and logs (default: checkpoints/multi30k_<src>-<tgt>)"
    )
    parser.add_argument(
        "--results-dir",
        help="where the scores, hypotheses and summary go (default: results/ for the full job, "
        "the run directory of a changed job: --max-minutes, --run-dir, --config, --average-last, "
        "--beam-sizes, --processes or overrides)",
    )
    parser.add_argument("overrides", nargs="*", help="extra config overrides (section.key=value)")
    args = parser.parse_intermixed_args(argv)  # overrides before, between or after the options
    problem = None  # checked before an hour of training, not after it
    given = {"--run-dir": args.run_dir, "--results-dir": args.results_dir}
    given.update({"--download-dir": args.download_dir, "--config": args.config})
    empty = [flag for flag, value in given.items() if value is not None and not value.strip()]
    if empty:  # --run-dir "" trained in the real job's run directory
        problem = f"{empty[0]} is empty: name a {'file' if empty[0] == '--config' else 'folder'}"
    elif args.processes is not None and args.processes < 1:
        problem = f"--processes ({args.processes}) must be at least 1"
    elif args.processes is not None and (too_many := too_many_processes(args.processes)):
        problem = f"--processes ({args.processes}): {too_many}"
    elif args.max_minutes is not None and not 0 < args.max_minutes < float("inf"):
        problem = f"--max-minutes ({args.max_minutes}) must be a positive number"
    try:
        args.average_last = validation_choice.counts(args.average_last, "--average-last", "5,10")
        args.beam_sizes = validation_choice.counts(args.beam_sizes, "--beam-sizes", "4,6")
    except ValueError as error:
        problem = problem or str(error)
    if problem:
        print(f"quickstart: error: {problem}", file=sys.stderr)
        return 2
    args.config = os.path.abspath(args.config)  # the steps run in the repository, not here

    src, tgt = args.direction.split("-")
    try:
        data_dir = find_multi30k(Path(args.download_dir))
    except FileNotFoundError as error:
        print(f"quickstart: error: {one_line(str(error))}", file=sys.stderr)
        return 1
    # A changed job of any kind (a quick try with --max-minutes, overrides, another config or
    # average) never touches the real job: its own run directory, and never results/.
    default_config = Path(args.config).resolve() == (REPO / "configs" / "multi30k.yaml")
    changed = args.max_minutes is not None or bool(args.overrides) or args.run_dir is not None
    changed = changed or not default_config or args.processes is not None
    choices = (list(validation_choice.AVERAGE_LAST), list(validation_choice.BEAM_SIZES))
    changed = changed or (args.average_last, args.beam_sizes) != choices
    name = f"multi30k_{src}-{tgt}"
    if changed and args.run_dir is None:
        key = repr((str(Path(args.config).resolve()), args.max_minutes, args.overrides))
        key += "" if args.processes is None else f" processes={args.processes}"
        key += f" {sorted(args.average_last)} {sorted(args.beam_sizes)}"
        name += f"-{hashlib.sha1(key.encode()).hexdigest()[:8]}"
    run_dir = Path(args.run_dir or CHECKPOINTS / name).resolve()
    if changed:
        print(f"quickstart: a changed job: run directory {run_dir}; results/ is left alone")
    overrides = [
        f"data.source_lang={src}",
        f"data.target_lang={tgt}",
        f"data.train={data_dir / 'train'}",
        f"data.valid={data_dir / 'val'}",
        f"data.test={data_dir / 'test_2016_flickr'}",
        f"train.output_dir={run_dir}",
    ]
    if args.max_minutes is not None:
        overrides.append(f"train.max_minutes={args.max_minutes}")
    overrides += args.overrides
    # Check the config and the test files before an hour of training, not after it.
    try:
        config = load_config(args.config, overrides)
    except (FileNotFoundError, ValueError) as error:  # a wrong config or override: status 2
        print(f"quickstart: error: {one_line(str(error))}", file=sys.stderr)
        return 2
    cores = usable_cores()
    processes = args.processes
    if processes is None:
        on_gpu = config.train.device != "cpu" and torch_sees_a_gpu()
        processes = 1 if on_gpu else cpu_processes(cores, config.train.tokens_per_update)
    threads = config.train.num_threads
    if processes > 1 and threads is None:
        # The cores shared out between the processes (on a CPU; a GPU's use one or two).
        threads = max(1, cores // processes)
        overrides.append(f"train.num_threads={threads}")
    problem = decoding_problem(config, args, overrides, src, tgt)
    if problem:
        print(f"quickstart: error: {problem}", file=sys.stderr)
        return 2
    if note := validation_choice.capped_averages(args.average_last, config.train.keep_last):
        print(f"quickstart: note: {note}", flush=True)  # now, not after the hour of training
    # results/ is only written by the full, unmodified job; made now, a bad directory fails
    results_dir = Path(args.results_dir or (run_dir if changed else REPO / "results"))
    try:  # before the hour of training, not after it
        results_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"quickstart: error: --results-dir {results_dir}: {error.strerror}", file=sys.stderr)
        return 1
    test_prefix = resolve_prefix(config.data.test)
    valid_prefix = resolve_prefix(config.data.valid or config.data.test)  # unused when empty
    python, start = sys.executable, time.time()
    train_command = training_command(python, processes, ["--config", args.config, *overrides])
    if args.fresh:
        train_command.append("--no-resume")
    again = "it without --fresh" if args.fresh else "the same command"  # --fresh starts over
    # Set, torchrun's OMP_NUM_THREADS is not replaced by 1 with a 4-line warning to tune it.
    run(train_command, again, {"OMP_NUM_THREADS": str(threads)} if processes > 1 else None)
    decode = yaml.safe_load((run_dir / "config.yaml").read_text())["decode"]
    valid = (Path(f"{valid_prefix}.{src}"), Path(f"{valid_prefix}.{tgt}"))
    try:
        chosen, averaged, validation = validation_choice.average_and_choose(
            run_dir, args.average_last, args.beam_sizes, valid, tgt, decode["length_penalty"],
            lambda command: run(command, again), python,
        )  # fmt: skip
    except ValueError as error:  # the run wrote no numbered checkpoint
        print(f"quickstart: error: {run_dir}: {error}", file=sys.stderr)
        return 1
    test_name = test_prefix.name
    # The recorded job's files keep their names; another test set adds its name.
    stem = f"multi30k_{src}-{tgt}" + ("" if test_name == "test_2016_flickr" else f".{test_name}")
    scores_path = results_dir / f"{stem}.scores.json"
    hyp_path = results_dir / f"multi30k_{src}-{tgt}.{test_name}.hyp.{tgt}"
    evaluate = [
        "--checkpoint", str(averaged), "--src", f"{test_prefix}.{src}",
        "--ref", f"{test_prefix}.{tgt}", "--target-lang", tgt,
        "--beam-size", str(chosen.beam_size),
        "--length-penalty", str(decode["length_penalty"]),
        "--hyp-out", str(hyp_path), "--json", str(scores_path),
    ]  # fmt: skip
    run([python, "-m", "transformer", "evaluate", *evaluate], again)
    report = json.loads(scores_path.read_text())
    scores = report["scores"]
    summary = MetricsLog(run_dir / "metrics.jsonl").summary()
    result = {
        "direction": f"{src}-{tgt}",
        "test_set": f"{test_prefix} ({scores['n_segments']} sentences)",
        "bleu": scores["bleu"],
        "chrf": scores["chrf"],
        "tokenized_bleu": scores["tokenized_bleu"],
        "signature": scores["signatures"]["bleu"],
        "chrf_signature": scores["signatures"]["chrf"],
        "tokenized_bleu_signature": scores["signatures"]["tokenized_bleu"],
        "checkpoint": {"file": averaged.name, "averaged_last": chosen.average_last},
        "validation": {"set": f"{valid_prefix}", "bleu": validation} if validation else None,
        "decoding": report.get("decoding", decode),
        **summary,
        "job_minutes": round((time.time() - start) / 60, 2),
        "command": f"TRANSFORMER_DATA_DIR={os.environ.get('TRANSFORMER_DATA_DIR', '')} python "
        f"scripts/quickstart.py {shlex.join(sys.argv[1:] if argv is None else argv)}",
        "config": yaml.safe_load((run_dir / "config.yaml").read_text()),
    }
    out = results_dir / f"{stem}.json"
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    speed = summary["tokens_per_second"]  # None before the first train.log_interval_steps
    rows = [
        ("sacreBLEU BLEU", f"{result['bleu']:.2f}  ({result['signature']})"),
        ("chrF", f"{result['chrf']:.2f}  ({result['chrf_signature']})"),
        ("tokenized BLEU (paper-style)", f"{result['tokenized_bleu']:.2f}"),
        ("training", f"{summary['train_minutes']:.1f} min, {summary['steps']} updates"),
        ("throughput", f"{speed} target tokens/s" if speed else "n/a (no training record yet)"),
        ("this command", f"{result['job_minutes']:.1f} min (training included, if it ran)"),
    ]
    print(
        f"\nMulti30k {src}->{tgt}, {test_name}, {chosen.weights}, "
        f"beam {chosen.beam_size}, alpha {decode['length_penalty']}"
        + (" (chosen on validation)" if validation else "")
    )
    for name, value in rows:
        print(f"  {name:<30} {value}")
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
