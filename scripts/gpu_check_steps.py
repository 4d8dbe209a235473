"""The steps of `scripts/gpu_check.py`: their sizes, time caps and what each one runs.

Each step is a function of the running `Check` (gpu_check.py) that returns its result as a
dict, or raises `StepError` ("failed" or "timeout") with what it measured so far. Steps start
processes through `check.command` / `check.worker` (each bounded by the step's deadline) and
import no torch themselves.
"""

from __future__ import annotations

import json
import re
import time

from scripts import gpu_check_figures as figures
from scripts.gpu_check_sizes import Sizes

# The paper's decoding (section 6.1; max_len_b is per mode) and the CLI's batch size.
DECODE = {"beam_size": 4, "length_penalty": 0.6, "max_len_a": 1.0, "max_tokens": 4096}
# Steps the CPU dry run skips, and why.
GPU_ONLY = {"install": "the checkout is used as it is", "a_pytest_gpu": "no GPU"}


class StepError(Exception):
    """A step failed ("failed") or ran past its cap ("timeout"), with what it measured."""

    def __init__(self, status: str, message: str, result: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.result = status, result


def versions(check) -> dict:
    """(f): versions of Python, torch, CUDA, the GPU and the packages."""
    check.worker("versions", str(check.work / "versions.json"), name="versions")
    return json.loads((check.work / "versions.json").read_text(encoding="utf-8"))


def install(check) -> dict:
    """The project installs without its dependencies and without an index (no network)."""
    pip = ["pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-e", "."]
    check.command([check.python, "-m", *pip], name="install")
    return {"command": "python -m " + " ".join(pip)}


def pytest_gpu(check) -> dict:
    """(a): `pytest -m gpu` on the files that hold GPU tests."""
    files = figures.gpu_test_files(check.repo / "tests")
    report = check.work / "pytest.xml"
    argv = ["-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", f"--junitxml={report}"]
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # not the image's plugins: the tests need none
    try:
        check.command([check.python, *argv, *files], name="pytest", env=env)
    except StepError as error:
        error.result = {"files": files, **figures.junit_summary(report)}
        raise
    return {"files": files, **figures.junit_summary(report)}


def resume(check) -> dict:
    """(b): N updates in run `whole`; N/2, then a resume to N, in run `half`: same weights?"""
    sizes, total = check.sizes, check.sizes.resume_steps
    overrides = [
        "data.valid=null",
        "data.test=null",
        f"train.device={sizes.device}",
        f"train.precision={sizes.precision}",
        "train.deterministic=true",
        "train.validate_interval_steps=0",
        "train.save_interval_steps=null",
        f"train.log_interval_steps={max(1, total // 4)}",
    ]
    if sizes.resume_vocab:
        overrides.append(f"data.vocab_size={sizes.resume_vocab}")
    launch = [check.python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1"]
    launch += ["-m", "transformer.cli.train", "--config", "configs/tiny.yaml", *overrides]
    logs = []
    runs = (("whole", total), ("half", total // 2), ("half", total))
    for number, (run, updates) in enumerate(runs):
        name = f"resume_{number}_{run}_to_{updates}"
        out = check.work / f"resume_{run}"
        check.command([*launch, f"train.output_dir={out}", f"train.max_steps={updates}"], name=name)
        logs.append(check.work / f"{name}.log")
    compared = check.work / "resume_compare.json"
    last = [str(check.work / f"resume_{run}" / "checkpoint_last.pt") for run in ("whole", "half")]
    check.worker("compare", *last, str(compared), name="resume_compare")
    result = json.loads(compared.read_text(encoding="utf-8"))
    result["updates"] = {"whole": total, "stopped_at": total // 2, "resumed_to": total}
    # What the trainer said about its processes and device, and that the last run resumed.
    said = logs[-1].read_text(encoding="utf-8", errors="replace").splitlines()
    result["trainer_says"] = [
        line.strip()[:300] for line in said if "process(es)" in line or "resum" in line.lower()
    ]
    groups = [re.search(r"process group: (\w+)", line) for line in result["trainer_says"]]
    result["process_group"] = next((group[1] for group in groups if group), None)
    if not result["bit_identical"]:
        raise StepError("failed", "the resumed run's weights differ from the whole run's", result)
    return result


def train(model: str, compile: bool):
    """(c), (d): the step that times configs/{model}.yaml, eager or with train.compile."""

    def step(check) -> dict:
        name = f"{model}_{'compile' if compile else 'eager'}"
        run_dir = check.work / "runs" / name
        timings, result = check.work / f"{name}.timings.jsonl", check.work / f"{name}.json"
        overrides = training_overrides(check.sizes, model, compile, check.vocab(), run_dir)
        # Stop cleanly (with a checkpoint) before the cap, leaving time for the start and save.
        minutes = max(0.2, (check.deadline - time.monotonic() - 35) / 60)
        overrides.append(f"train.max_minutes={minutes:.2f}")
        if check.args.peak_tflops:
            overrides.append(f"train.peak_tflops={check.args.peak_tflops}")
        spec = {"config": f"configs/{model}.yaml", "overrides": overrides}
        spec.update(timings=str(timings), result=str(result))
        first, count = check.sizes.profile
        profile = check.work / f"{name}_profile"  # .json and .txt
        spec["profile"] = {"first": first, "count": count, "out": str(profile)}
        (check.work / f"{name}.spec.json").write_text(json.dumps(spec), encoding="utf-8")
        warmup = check.sizes.warmup_updates[compile]

        def measured() -> dict:
            done = json.loads(result.read_text("utf-8")) if result.is_file() else {}
            steady = figures.training_figures(
                figures.read_timings(timings), warmup, done.get("peak_flops")
            )
            trainer_log = figures.trainer_records(run_dir, warmup)
            profiled = profile.with_suffix(".json")
            profiled = json.loads(profiled.read_text("utf-8")) if profiled.is_file() else None
            return {
                **done,
                "environment": env,
                "steady_state": steady,
                "trainer_log": trainer_log,
                "profile": profiled,
            }

        env = check.sizes.compile_env if compile else {}
        try:
            check.worker("train", str(check.work / f"{name}.spec.json"), name=name, env=env)
        except StepError as error:
            error.result = measured()
            raise
        return measured()

    return step


def training_overrides(sizes: Sizes, model: str, compile: bool, vocab: int, run_dir) -> list:
    """The overrides of one timed run of configs/{model}.yaml on the data folder's news text."""
    updates, tokens = sizes.updates[model], sizes.tokens_per_update
    return [
        *sizes.model_overrides[model],
        "data.train=news/train",
        "data.valid=null",
        "data.test=null",
        f"data.vocab_size={vocab}",
        f"train.output_dir={run_dir}",
        f"train.max_steps={updates}",
        f"train.tokens_per_update={tokens}",
        f"train.max_tokens={tokens}",
        f"train.device={sizes.device}",
        f"train.precision={sizes.precision}",
        f"train.compile={str(compile).lower()}",
        # A short warm-up to a moderate peak, so that the model decoded in (e) has learned
        # when to stop; the learning rate does not change the time of an update.
        "train.lr_schedule=inverse_sqrt",
        "train.peak_lr=5e-4",
        f"train.warmup_steps={max(2, updates // 2)}",
        "train.save_interval_steps=null",
        "train.save_interval_minutes=null",
        "train.validate_interval_steps=0",
        f"train.log_interval_steps={max(1, updates // 10)}",
    ]


def decode(check) -> dict:
    """(e): beam 4, alpha 0.6, input + 50, of newstest2014 with the base model of (c)."""
    checkpoint = check.work / "runs" / "base_eager" / "checkpoint_last.pt"
    if not checkpoint.is_file():
        raise StepError("failed", f"no base model to decode with: {checkpoint} (c failed)")
    test, out = check.data / "wmt14-en-de" / "newstest2014", check.work / "decode.json"
    spec = {
        "checkpoint": str(checkpoint),
        "source": f"{test}.en",
        "reference": f"{test}.de",
        "device": check.sizes.device,
        "precisions": list(check.sizes.decode_precisions),
        **DECODE,
        "max_len_b": check.sizes.decode_max_len_b,
        "warmup_sentences": check.sizes.decode_warmup,
        "sentences": check.sizes.decode_sentences,
        "result": str(out),
    }
    (check.work / "decode.spec.json").write_text(json.dumps(spec), encoding="utf-8")
    model = {"model": "c_base_eager's last checkpoint (base size, trained by this check)"}
    try:
        check.worker("decode", str(check.work / "decode.spec.json"), name="decode")
    except StepError as error:
        error.result = {**model, **json.loads(out.read_text("utf-8"))} if out.is_file() else None
        raise
    return {**model, **json.loads(out.read_text(encoding="utf-8"))}


def attention(check) -> dict:
    """(g): multi-head attention on new shapes, first call and again, per SDPA backend."""
    out = check.work / "attention.json"
    spec = {"device": check.sizes.device, "precision": check.sizes.precision, "repeats": 3}
    spec.update(check.sizes.attention, result=str(out))
    (check.work / "attention.spec.json").write_text(json.dumps(spec), encoding="utf-8")
    check.worker("attention", str(check.work / "attention.spec.json"), name="attention")
    return json.loads(out.read_text(encoding="utf-8"))


# (step key, time cap in seconds (the overall budget can shorten it), step), in the order
# they run. The compiled base model (issue 13's main target) comes right after the eager one:
# its compilation took about two minutes on an H200. The compiled big model, as long again,
# comes last and gets what the budget leaves (alone: `--steps d_big_compile --budget-s 260`).
PLAN = [
    ("f_versions", 45, versions),
    ("install", 60, install),
    ("a_pytest_gpu", 90, pytest_gpu),
    ("b_resume", 120, resume),
    ("c_base_eager", 75, train("base", compile=False)),
    ("c_base_compile", 210, train("base", compile=True)),
    ("d_big_eager", 90, train("big", compile=False)),
    ("e_decode", 90, decode),
    ("g_attention_shapes", 40, attention),
    ("d_big_compile", 210, train("big", compile=True)),
]
