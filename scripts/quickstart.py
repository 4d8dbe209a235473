"""The main job: train on Multi30k, average checkpoints, decode test_2016_flickr, score BLEU.

    TRANSFORMER_DATA_DIR=../shared/data python scripts/quickstart.py            # EN->DE
    python scripts/quickstart.py --direction de-en                               # DE->EN
    python scripts/quickstart.py --max-minutes 5 train.max_steps=200             # a short try

Steps (each one the project's own command, run as a subprocess so that what you see is what a
user gets from the CLI):

1. find Multi30k in `$TRANSFORMER_DATA_DIR/multi30k` (train/val/test_2016_flickr .en/.de), or
   download it with `datasets` from the Hugging Face dataset `bentrevett/multi30k` into
   `data/multi30k` (needs network access; a clear error says what to do without it;
   `transformer/data/multi30k.py`);
2. `transformer-train --config configs/multi30k.yaml` on the GPU when present; on a CPU one
   process per core with one thread each, under torchrun (`transformer/cli/torchrun.py`,
   `transformer/cpu/processes.py`; `--processes N` to choose);
3. `transformer-average --last N` over the run's last checkpoints;
4. `transformer-evaluate` on test_2016_flickr with the config's decoding (beam 4, alpha 2.0);
5. print a results table and write `results/multi30k_<src>-<tgt>.json`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from transformer.atomic import atomic_write_text
from transformer.cli.common import one_line
from transformer.config import load_config
from transformer.cpu.processes import cpu_processes
from transformer.data.corpus import resolve_prefix
from transformer.data.multi30k import find_multi30k
from transformer.data.tokenizer import usable_cores
from transformer.train.metrics_log import MetricsLog
from transformer.train.run_directory import RunDirectory

REPO = Path(__file__).resolve().parents[1]
# Exit status after Ctrl-C or SIGTERM, once the running step has stopped cleanly (as the CLIs).
INTERRUPTED = 130


def torch_sees_a_gpu() -> bool:
    """Whether torch finds a CUDA device (imported here: the other steps do not need torch)."""
    import torch

    return torch.cuda.is_available()


def run(command: list[str], again: str = "the same command") -> None:
    """Echo and run a command; exit with its status if it fails (after an interruption: one
    line, "rerun `again` to resume").

    Its OpenMP threads sleep at once when they wait (`OMP_WAIT_POLICY=PASSIVE`, unless the
    environment sets it): spinning threads slow a multi-threaded run many times over when
    another job takes a core, and cost nothing measurable alone (BENCHMARKS.md, "CPU
    training: kernel time"). libgomp reads it when torch starts, so it goes in the
    subprocess's environment.
    """
    env = dict(os.environ)
    shown = "" if "OMP_WAIT_POLICY" in env else "OMP_WAIT_POLICY=PASSIVE "
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    print("+ " + shown + shlex.join(command), flush=True)
    # The step runs in a process group of its own, and every Ctrl-C or SIGTERM the quickstart
    # gets is passed on to it exactly once: a terminal's Ctrl-C (sent to the foreground group)
    # and a `kill PID` of the quickstart alone (what a supervisor sends) stop it the same way,
    # and a second Ctrl-C still means "abort at once" to the step (to all of its processes).
    group = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
    process = subprocess.Popen(command, cwd=REPO, env=env, **group)
    received = []

    def forward(signum, frame):
        received.append(signum)
        if len(received) == 1:
            process.send_signal(signum)
            return
        # A second one goes to the step's whole group: under torchrun, the launcher passed the
        # first on to its processes once, and the second Ctrl-C must reach them too (abort).
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:  # the step has already ended
            pass

    passed_on = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, forward) for signum in passed_on}
    try:
        status = process.wait()  # retried after each forwarded signal (PEP 475)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    interrupted = bool(received)
    if interrupted or status in (130, 143):  # Ctrl-C or SIGTERM: the step stopped cleanly
        print(f"quickstart: interrupted; rerun {again} to resume", file=sys.stderr)
        sys.exit(status if status in (130, 143) else INTERRUPTED)
    if status != 0:
        sys.exit(f"quickstart: command failed with exit status {status}: {shlex.join(command)}")


def training_command(python: str, processes: int, arguments: list[str]) -> list[str]:
    """`transformer.cli.train` with `arguments`, under torchrun when `processes` > 1.

    The processes are one machine's (`--standalone`: torch.distributed's own rendezvous on a
    free local port), as `torchrun --standalone --nproc_per_node N -m transformer.train` runs
    them (README, "Training on GPUs").
    """
    train = ["-m", "transformer.cli.train", *arguments]
    if processes == 1:
        return [python, *train]
    # torchrun itself, ending in one line instead of a traceback (transformer/cli/torchrun.py).
    launcher = ["-m", "transformer.cli.torchrun", "--standalone", f"--nproc_per_node={processes}"]
    return [python, *launcher, *train]


def main(argv: list[str] | None = None) -> int:
    """Run the whole job; returns 0 on success, 1 when a step fails, 2 for a wrong command line
    or config, 130 after Ctrl-C (143 after SIGTERM of a step): one line, no traceback."""
    try:
        return _job(argv)
    except KeyboardInterrupt:
        print("quickstart: interrupted; rerun the same command to resume", file=sys.stderr)
        return INTERRUPTED


def _job(argv: list[str] | None) -> int:
    """The steps of the module docstring (see `main`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--direction", default="en-de", choices=["en-de", "de-en"])
    parser.add_argument("--config", default=str(REPO / "configs" / "multi30k.yaml"))
    parser.add_argument("--max-minutes", type=float, help="override train.max_minutes")
    parser.add_argument("--average-last", type=int, default=5, help="checkpoints to average (5)")
    parser.add_argument("--download-dir", default=str(REPO / "data" / "multi30k"))
    parser.add_argument("--fresh", action="store_true", help="retrain even if the run exists")
    parser.add_argument(
        "--processes",
        type=int,
        help="training processes (default: 1 on a GPU; on a CPU one per core, one thread each)",
    )
    parser.add_argument(
        "--run-dir", help="checkpoints and logs (default: checkpoints/multi30k_<src>-<tgt>)"
    )
    parser.add_argument(
        "--results-dir",
        help="where the scores, hypotheses and summary go (default: results/ for the full job, "
        "the run directory of a changed job: --max-minutes, --run-dir, --config, --average-last, "
        "--processes or overrides)",
    )
    parser.add_argument("overrides", nargs="*", help="extra config overrides (section.key=value)")
    args = parser.parse_args(argv)
    problem = None  # checked before an hour of training, not after it
    if args.average_last < 1:
        problem = f"--average-last ({args.average_last}) must be at least 1"
    elif args.processes is not None and args.processes < 1:
        problem = f"--processes ({args.processes}) must be at least 1"
    elif args.max_minutes is not None and not 0 < args.max_minutes < float("inf"):
        problem = f"--max-minutes ({args.max_minutes}) must be a positive number"
    if problem:
        print(f"quickstart: error: {problem}", file=sys.stderr)
        return 2

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
    changed = changed or not default_config or args.average_last != 5
    changed = changed or args.processes is not None
    name = f"multi30k_{src}-{tgt}"
    if changed and args.run_dir is None:
        key = repr((str(Path(args.config).resolve()), args.max_minutes, args.overrides))
        key += "" if args.processes is None else f" processes={args.processes}"
        name += f"-{hashlib.sha1(f'{key} {args.average_last}'.encode()).hexdigest()[:8]}"
    run_dir = Path(args.run_dir or REPO / "checkpoints" / name).resolve()
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
    test = config.data.test
    cores = usable_cores()
    processes = args.processes
    if processes is None:
        on_gpu = config.train.device != "cpu" and torch_sees_a_gpu()
        processes = 1 if on_gpu else cpu_processes(cores, config.train.tokens_per_update)
    if processes > 1 and config.train.num_threads is None:
        # The cores shared out between the processes (on a CPU; a GPU's use one or two).
        overrides.append(f"train.num_threads={max(1, cores // processes)}")
    test_prefix = resolve_prefix(test) if test else data_dir / "test_2016_flickr"
    for lang in (src, tgt):
        if not Path(f"{test_prefix}.{lang}").is_file():
            sys.exit(f"quickstart: test file not found: {test_prefix}.{lang} (data.test={test})")
    python = sys.executable
    start = time.time()
    train_command = training_command(python, processes, ["--config", args.config, *overrides])
    if args.fresh:
        train_command.append("--no-resume")
    again = "it without --fresh" if args.fresh else "the same command"  # --fresh starts over
    run(train_command, again)
    # A short run may have fewer checkpoints than --average-last: average what there is.
    available = len(RunDirectory(run_dir).numbered_checkpoints())
    average_last = max(1, min(args.average_last, available))
    if average_last < args.average_last:
        print(
            f"quickstart: {run_dir} holds {available} checkpoint(s); averaging "
            f"{average_last} instead of {args.average_last}",
            flush=True,
        )
    averaged = run_dir / f"checkpoint_avg{average_last}.pt"
    average = ["--last", str(average_last), "--dir", str(run_dir), "--output", str(averaged)]
    run([python, "-m", "transformer.cli.average", *average], again)
    run_config = yaml.safe_load((run_dir / "config.yaml").read_text())
    decode = run_config["decode"]
    # The recorded results in results/ are only replaced by the full, unmodified job.
    results_dir = Path(args.results_dir or (run_dir if changed else REPO / "results"))
    results_dir.mkdir(parents=True, exist_ok=True)
    test_name = test_prefix.name
    # The recorded job's files keep their names; another test set adds its name.
    stem = f"multi30k_{src}-{tgt}" + ("" if test_name == "test_2016_flickr" else f".{test_name}")
    scores_path = results_dir / f"{stem}.scores.json"
    hyp_path = results_dir / f"multi30k_{src}-{tgt}.{test_name}.hyp.{tgt}"
    evaluate = [
        "--checkpoint", str(averaged), "--src", f"{test_prefix}.{src}",
        "--ref", f"{test_prefix}.{tgt}", "--beam-size", str(decode["beam_size"]),
        "--length-penalty", str(decode["length_penalty"]),
        "--hyp-out", str(hyp_path), "--json", str(scores_path),
    ]  # fmt: skip
    run([python, "-m", "transformer.cli.evaluate", *evaluate], again)
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
        "checkpoint": {"file": averaged.name, "averaged_last": average_last},
        "decoding": report.get("decoding", decode),
        **summary,
        "job_minutes": round((time.time() - start) / 60, 2),
        "command": f"TRANSFORMER_DATA_DIR={os.environ.get('TRANSFORMER_DATA_DIR', '')} "
        + "python scripts/quickstart.py "
        + shlex.join(sys.argv[1:] if argv is None else argv),
        "config": yaml.safe_load((run_dir / "config.yaml").read_text()),
    }
    out = results_dir / f"{stem}.json"
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    rows = [
        ("sacreBLEU BLEU", f"{result['bleu']:.2f}  ({result['signature']})"),
        ("chrF", f"{result['chrf']:.2f}  ({result['chrf_signature']})"),
        ("tokenized BLEU (paper-style)", f"{result['tokenized_bleu']:.2f}"),
        ("training", f"{summary['train_minutes']:.1f} min, {summary['steps']} updates"),
        ("throughput", f"{summary['tokens_per_second']} target tokens/s"),
        ("whole job", f"{result['job_minutes']:.1f} min"),
    ]
    print(
        f"\nMulti30k {src}->{tgt}, {test_name}, averaged last {average_last}, "
        f"beam {decode['beam_size']}, alpha {decode['length_penalty']}"
    )
    for name, value in rows:
        print(f"  {name:<30} {value}")
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
