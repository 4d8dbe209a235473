"""One prepared check of the whole GPU path, in at most about 8 minutes on one GPU (issue #13).

    bash scripts/gpu_check.sh --out $OUT/gpu_check.json [--data gpu_data] [--steps a,b,e]
    bash scripts/gpu_check.sh --dry-run --out /tmp/gpu_check.json   # the same steps, tiny, CPU
    python -m scripts.gpu_check --help     # from the checkout (the .sh: paths under the caller's)

Steps, in the order they run (the letters are the issue's), each in processes of its own with
its own time cap inside one overall budget; a failed step is recorded and the next one runs:

  (f) f_versions      Python, torch, CUDA, cuDNN, NCCL, the GPU, packages
      install         `pip install --no-deps --no-build-isolation --no-index -e .` (GPU only)
  (a) a_pytest_gpu    `pytest -m gpu` on the test files that hold GPU tests (GPU only)
  (b) b_resume        configs/tiny.yaml under `torch.distributed.run --nproc_per_node 1`
                      (NCCL on a GPU, gloo on CPU) with train.deterministic: N updates in one
                      run; N/2, then a resume to N, in another: are the weights bitwise equal?
  (c) c_base_eager    the base model (configs/base.yaml), bf16, 25,000 tokens per update
  (c) c_base_compile  the same with train.compile
  (d) d_big_eager     the big model (configs/big.yaml) the same way, fewer updates
  (e) e_decode        beam 4, alpha 0.6, of the 3003 newstest2014 sentences with the model of
                      (c): sentences/s, target tokens/s, output lengths, sacreBLEU
  (g) g_attention_shapes  attention (forward + backward) on shapes not seen before, per SDPA
                      backend: the cost of a new batch shape, the fastest backend
  (d) d_big_compile   (d) with train.compile, last, in what the budget leaves (its compilation
                      takes about two minutes on an H200; alone: `--steps d_big_compile
                      --budget-s 260`)

A training step reports steady-state target tokens/s, MFU (gpu_check_figures.py says how the
FLOPs are counted), the share of the time spent waiting for a batch, peak GPU memory and the
compile time, with a profile of a few updates after the first epoch (the kernels that took the
device's time, and how busy it was). The JSON file (`--out`) is rewritten after every step,
so a run cut short keeps what it measured; every command's output goes to a log beside it
(same name, `.log`).

Data: a folder made by `scripts/gpu_check_data.sh` (by default `gpu_data/` when it is
complete): real news text to train on (newstest 2008-2013, 16,573 pairs, with the paper's
37,000-piece BPE vocabulary, so the models have the paper's sizes), newstest2014 to decode, and
Multi30k for the GPU tests. Without it (or with `--data synthetic`) the check writes synthetic
sentences, with an 8,000-piece vocabulary. Modules: gpu_check_steps (the steps), _figures (data,
arithmetic), _worker (the processes that use torch), _timing (the batch fetches it times),
_sizes (the two modes' sizes), _probe (a profile of a few updates; attention on new shapes).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from scripts import gpu_check_figures as figures
from scripts import gpu_check_steps as steps
from scripts.gpu_check_sizes import DRY, GPU

REPO = Path(__file__).resolve().parents[1]


class Interrupted(Exception):
    """The check received SIGTERM (its caller's time limit) or SIGINT (Ctrl-C): args[0]."""


def say(message: str) -> None:
    """One progress line on stdout."""
    print(f"[gpu-check] {message}", flush=True)


def label(key: str) -> str:
    """How progress lines name a step: "c_base_eager" -> "(c) base eager"."""
    letter, _, rest = key.partition("_")
    return f"({letter}) {rest.replace('_', ' ')}" if len(letter) == 1 else key


class Check:
    """One run of the check: its report (the JSON file), its clock, the commands it starts."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.sizes = args, DRY if args.dry_run else GPU
        self.repo, self.python, self.out = REPO, sys.executable, Path(args.out).resolve()
        self.work = Path(args.work_dir or tempfile.mkdtemp(prefix="gpu_check_")).resolve()
        self.work.mkdir(parents=True, exist_ok=True)
        if args.work_dir is None:  # a folder of its own: removed when the check exits
            atexit.register(shutil.rmtree, self.work, ignore_errors=True)
        self.log = self.out.with_suffix(".log")
        self.log.write_text("", encoding="utf-8")
        self.started, self.budget = time.monotonic(), args.budget_s or self.sizes.budget_seconds
        self.deadline = self.started
        self.child: subprocess.Popen | None = None
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=path)
        self.report = {
            "check": "scripts/gpu_check.py",
            "dry_run": args.dry_run,
            "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "budget_seconds": self.budget,
            "finished": False,
            "steps": {},
        }

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def vocab(self) -> int:
        """The vocabulary of the timed runs: the paper's with real text, smaller otherwise."""
        return self.sizes.vocab_size if self.report["data"]["real"] else self.sizes.synthetic_vocab

    def save(self) -> None:
        """Rewrite the JSON file whole (a temporary file renamed over it)."""
        self.report["elapsed_seconds"] = round(self.elapsed(), 1)
        temporary = self.out.with_name(self.out.name + ".tmp")
        text = json.dumps(self.report, indent=2) + "\n"  # steps in the order they ran
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(self.out)

    def run_step(self, key: str, cap: float, function, later: int) -> None:
        """Run one step under its cap, shortened to leave each of the `later` steps a reserve."""
        reserve = self.budget - self.elapsed() - later * self.sizes.reserve_seconds
        cap = min(cap, reserve)
        entry: dict = {"cap_seconds": round(cap, 1)}
        self.report["steps"][key] = entry
        start = time.monotonic()
        if cap < 5:
            entry.update(status="skipped", reason="the overall budget was spent")
        else:
            say(f"{label(key)}: running (cap {cap:.0f} s)")
            self.deadline = start + cap
            try:
                entry.update(status="ok", result=function(self))
            except steps.StepError as error:
                entry.update(status=error.status, error=str(error))
                if error.result is not None:
                    entry["result"] = error.result
            except Interrupted:
                entry.update(status="interrupted")
                raise
            except Exception as error:  # a bug in one step must not stop the others
                entry.update(status="failed", error=f"{type(error).__name__}: {error}")
        entry["seconds"] = round(time.monotonic() - start, 1)
        error = entry.get("error", "")[-600:]  # a failure's last lines
        say(f"{label(key)}: {entry['status']} in {entry['seconds']} s {error}".rstrip())
        self.save()

    def command(self, argv: list[str], name: str, env: dict | None = None) -> None:
        """Run `argv` in the checkout until the step's deadline; output to `<work>/<name>.log`
        and to the combined log. `env` adds to the environment.

        Raises:
            StepError: "failed" (non-zero exit) or "timeout", with the log's last lines.
        """
        log_path = self.work / f"{name}.log"
        timeout = max(1.0, self.deadline - time.monotonic())
        with open(log_path, "wb") as log:
            self.child = subprocess.Popen(
                argv,
                cwd=REPO,
                env={**self.env, **(env or {})},
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=os.setpgrp,  # its own process group: a timeout ends its children
            )
            try:
                code = self.child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                self._stop_child()
        text = log_path.read_text(encoding="utf-8", errors="replace")
        with open(self.log, "a", encoding="utf-8") as combined:
            combined.write(f"\n===== {name}: {' '.join(argv)}\n{text}")
        if code != 0:
            tail = "\n".join(text.strip().splitlines()[-12:])
            what = f"ran past {timeout:.0f} s" if code is None else f"exited with {code}"
            status = "timeout" if code is None else "failed"
            raise steps.StepError(status, f"{name} {what}:\n{tail}")

    def worker(self, *args: str, name: str, env: dict | None = None) -> None:
        """Run one `gpu_check_worker.py` command (see `command`)."""
        self.command([self.python, "-m", "scripts.gpu_check_worker", *args], name, env)

    def _stop_child(self) -> None:
        """End the command's process group: SIGTERM and 10 s of grace if the command still
        runs, then SIGKILL for whatever is left of the group (stray children)."""
        child, self.child = self.child, None
        if child is None:
            return
        try:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):  # the group is gone already
            pass


def prepare_data(check: Check) -> None:
    """Use the data folder (`--data`; default gpu_data/ when complete) or write synthetic text."""
    chosen, synthetic = check.args.data, check.sizes.synthetic_pairs
    try:
        folder, real, pairs = figures.data_folder(chosen, REPO / "gpu_data", check.work, synthetic)
    except ValueError as error:  # a --data folder that lacks a corpus
        raise SystemExit(f"gpu_check: {error}") from None
    check.data = folder
    check.report["data"] = {"real": real, "path": str(folder), "pairs": pairs}
    check.report["data"]["vocab_size"] = check.vocab()
    check.env["TRANSFORMER_DATA_DIR"] = str(folder)
    say(f"data: {'real text' if real else 'synthetic sentences'} in {folder}: {pairs} pairs")


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--out", required=True, help="the JSON file to write (its log beside it)")
    parser.add_argument("--data", help="a gpu_check_data.sh folder, or 'synthetic'")
    parser.add_argument("--dry-run", action="store_true", help="the same steps, tiny, on CPU")
    parser.add_argument(
        "--steps",
        help="comma-separated letters or step keys (default: all; e needs c_base_eager's model:"
        " --steps c_base_eager,e)",
    )
    parser.add_argument(
        "--work-dir", help="for run directories and logs (default: a new one in /tmp, removed)"
    )
    parser.add_argument("--budget-s", type=float, help="overall time budget in seconds")
    parser.add_argument(
        "--peak-tflops", type=float, help="the GPU's peak for MFU (default: by its name)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the check: 0 when every step ran ok (or was skipped), 128 + a signal that stopped it,
    else 1."""
    parser = build_parser()
    args = parser.parse_args(argv)
    wanted = args.steps.split(",") if args.steps is not None else None
    keys = [key for key, _, _ in steps.PLAN]
    for w in wanted or []:  # a step nobody runs must not end in "all ok"
        if not any(key == w or key.startswith(f"{w}_") for key in keys):
            parser.error(f"--steps: unknown step {w!r}; steps: {', '.join(keys)}")
    if args.budget_s is not None and not args.budget_s > 0:
        parser.error(f"--budget-s ({args.budget_s}) must be positive")
    out = Path(args.out)
    if (out.exists() and not out.is_file()) or not out.parent.is_dir() or out.suffix == ".log":
        parser.error(f"--out {out}: a .json file in an existing directory")  # not /dev/null
    if args.work_dir == "" or (args.work_dir and Path(args.work_dir).is_file()):
        parser.error(f"--work-dir {args.work_dir!r}: a folder (leave it out for one in /tmp)")
    check = Check(args)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _interrupt)
    plan = [
        (key, cap, function)
        for key, cap, function in steps.PLAN
        if wanted is None
        or key in ("f_versions", "install")
        or any(key == w or key.startswith(f"{w}_") for w in wanted)
    ]
    mode = "dry run (CPU, tiny sizes)" if args.dry_run else "GPU check"
    stopped = 0  # the signal that stops the check, if one does
    try:  # a signal may come as soon as the handlers are in place: during this line
        say(f"{mode}: {len(plan)} steps, budget {check.budget:.0f} s, work dir {check.work}")
        prepare_data(check)
        check.save()
        for index, (key, cap, function) in enumerate(plan):
            if args.dry_run and key in steps.GPU_ONLY:
                reason = f"dry run: {steps.GPU_ONLY[key]}"
                check.report["steps"][key] = {"status": "skipped", "reason": reason}
                say(f"{label(key)}: skipped ({reason})")
                continue
            check.run_step(key, cap, function, later=len(plan) - index - 1)
        check.report["finished"] = True
    except Interrupted as stop:
        stopped, name = stop.args[0], signal.Signals(stop.args[0]).name
        say(f"interrupted ({name}): the JSON holds the steps done so far")
    check.report["summary"] = figures.summary(check.report)
    check.save()
    for key, value in check.report["summary"].items():
        say(f"  {key} = {value}")
    bad = [k for k, e in check.report["steps"].items() if e["status"] not in ("ok", "skipped")]
    verdict = "all ok" if check.report["finished"] else "stopped before the last step"
    say(f"done in {check.elapsed():.0f} s: {'not ok: ' + ', '.join(bad) if bad else verdict}")
    say(f"wrote {check.out} and {check.log}")
    return 128 + stopped if stopped else 0 if not bad and check.report["finished"] else 1


def _interrupt(signum, frame) -> None:
    raise Interrupted(signum)


if __name__ == "__main__":
    sys.exit(main())
