"""The measuring half of `scripts/gpu_check.py`: each command runs in its own process.

    python -m scripts.gpu_check_worker versions OUT.json
    python -m scripts.gpu_check_worker train SPEC.json     # one Trainer run, every update timed
    python -m scripts.gpu_check_worker decode SPEC.json    # beam-4 decoding of a test set
    python -m scripts.gpu_check_worker compare A.pt B.pt OUT.json
    python -m scripts.gpu_check_worker attention SPEC.json # attention on new shapes, per backend

The driver (`gpu_check.py`) imports no torch: it starts these processes with a time cap each,
so a hang, a crash or an out-of-memory error in one measurement cannot stop the others, and
each process's peak GPU memory is its own. Each command writes its results as JSON (a decode
writes after each precision, so a run cut off by its cap keeps what it measured).
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

from scripts.gpu_check_probe import UpdateProfiler, attention_shapes
from scripts.gpu_check_timing import TimedBatches
from transformer.atomic import atomic_write_text

REPO = Path(__file__).resolve().parents[1]

# The model dimensions a training result records.
MODEL_SIZES = ("d_model", "d_ff", "n_heads", "n_encoder_layers", "n_decoder_layers", "vocab_size")
# Distributions whose versions the check records (those the GPU machine's image provides).
PACKAGES = ("numpy", "sentencepiece", "sacrebleu", "PyYAML", "tqdm", "pytest", "transformers")


def write_json(path: str | Path, value: dict) -> None:
    """Write `value` to `path` whole (`transformer.atomic`: a temporary file renamed over it)."""
    atomic_write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def versions(out: str) -> None:
    """(f): Python, torch, CUDA, cuDNN, NCCL, the GPU and the packages the check relies on."""
    # First, before anything else is imported: the training entry point must not pull in
    # optional packages when it is imported (the GPU machine has no `datasets`).
    import transformer.cli.train  # noqa: F401

    optional = [name for name in ("datasets", "transformers", "matplotlib") if name in sys.modules]
    try:
        import datasets  # noqa: F401

        datasets_importable = True
    except ImportError:
        datasets_importable = False
    info = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "packages": {name: _version(name) for name in PACKAGES},
        "datasets_importable": datasets_importable,
        "optional_modules_loaded_by_cli_train": optional,
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        smi = shutil.which("nvidia-smi") and subprocess.run(query, capture_output=True, text=True)
        nccl = torch.cuda.nccl.version()
        info.update(
            gpu=props.name,
            gpu_count=torch.cuda.device_count(),
            gpu_memory_gib=round(props.total_memory / 2**30, 1),
            compute_capability=f"{props.major}.{props.minor}",
            bf16_supported=torch.cuda.is_bf16_supported(),
            nccl=".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl),
            driver=smi.stdout.strip() if smi else None,
        )
    write_json(out, info)


def _version(name: str) -> str | None:
    """The installed version of a distribution (without importing it), None when absent."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def train(spec_path: str) -> None:
    """(c, d): train in this process with every batch fetch timed (see `TimedBatches`).

    SPEC keys: `config`, `overrides`, `timings` (the JSONL of updates), `result` (the JSON
    written before training, with the model's size and the peak FLOP/s, and again at the end,
    with the stop reason and peak GPU memory), optionally `profile` (UpdateProfiler's args).
    """
    from transformer.config import load_config
    from transformer.train.flops import device_peak_flops
    from transformer.train.trainer import Trainer

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    config = load_config(REPO / spec["config"], spec["overrides"])
    train = config.train
    started = time.perf_counter()
    trainer = Trainer(config, resume=False, log=print)
    setup_seconds = time.perf_counter() - started
    profile = spec.get("profile")  # {"first", "count", "out"}: see gpu_check_probe.py
    profiler = profile and UpdateProfiler(**profile, device=trainer.device)
    timed = TimedBatches(trainer.batches, Path(spec["timings"]), trainer.config.model, profiler)
    trainer.batches = timed  # the loop iterates `self.batches`; checkpoints keep the original
    cuda = trainer.device.type == "cuda"
    result = {
        "setup_seconds": setup_seconds,
        "device": str(trainer.device),
        "precision": trainer.precision,
        "compile": train.compile,
        "model": {key: getattr(trainer.config.model, key) for key in MODEL_SIZES},
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "batch_plan": trainer.plan.describe(),
        "update_freq": trainer.update_freq,
        "peak_flops": device_peak_flops(trainer.device, trainer.precision, train.peak_tflops),
        "finished": False,
    }
    write_json(spec["result"], result)  # the model's size even if the run is cut off
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    state = trainer.train()  # closes `timed` at the end
    result.update(
        train_seconds=time.perf_counter() - started,
        steps=state.step,
        stop_reason=state.stop_reason,
        finished=True,
    )
    if cuda:
        result["peak_memory_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        result["peak_memory_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
    write_json(spec["result"], result)


class CountingTokenizer:
    """A tokenizer that counts, per `decode` call, the target tokens it turns into text."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.lengths = tokenizer, []

    def __getattr__(self, name: str):
        return getattr(self.tokenizer, name)

    def decode(self, ids) -> str:
        ids = list(ids)
        self.lengths.append(len(ids))
        return self.tokenizer.decode(ids)


def decode(spec_path: str) -> None:
    """(e): beam search over a test set, once per precision; sentences/s and tokens/s.

    SPEC keys: `checkpoint`, `source`, `reference` (or null), `device`, `precisions`
    ("fp32", "bf16"), `beam_size`, `length_penalty`, `max_len_a`, `max_len_b`, `max_tokens`,
    `warmup_sentences`, `sentences` (the first ones are decoded; null: all), `result`.
    """
    from transformer.checkpoint import load_checkpoint
    from transformer.data.corpus import read_lines
    from transformer.decode.search import max_output_lengths
    from transformer.decode.translator import Translator

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    sources = read_lines(spec["source"])[: spec["sentences"]]
    references = read_lines(spec["reference"])[: len(sources)] if spec["reference"] else None
    model, tokenizer, _ = load_checkpoint(spec["checkpoint"], device=spec["device"])
    settings = {
        key: spec[key]
        for key in ("beam_size", "length_penalty", "max_len_a", "max_len_b", "max_tokens")
    }
    source_lengths = [len(ids) for ids in tokenizer.encode_batch(sources)]
    a, b = spec["max_len_a"], spec["max_len_b"]  # output tokens, eos included:
    limits = max_output_lengths(torch.tensor(source_lengths), a, b, model.config.max_positions)
    result = {"sentences": len(sources), "settings": settings, "by_precision": {}}
    cuda = torch.device(spec["device"]).type == "cuda"
    for precision in spec["precisions"]:
        counting = CountingTokenizer(tokenizer)
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
        translator = Translator(model.to(dtype), counting, device=spec["device"])
        translator.translate(sources[: spec["warmup_sentences"]], **settings)  # kernels, caches
        counting.lengths.clear()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        outputs = translator.translate(sources, **settings)  # strings: the GPU has finished
        seconds = time.perf_counter() - started
        lengths = counting.lengths
        peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
        at_limit = None  # outputs cut off at the limit: no eos, or eos as the last token allowed
        if len(lengths) == len(limits):  # one decoded output per sentence (none was empty)
            at_limit = sum(n >= m - 1 for n, m in zip(lengths, limits, strict=True))
        entry = {
            "seconds": seconds,
            "sentences_per_second": len(sources) / seconds,
            "target_tokens": sum(lengths),
            "target_tokens_per_second": sum(lengths) / seconds,
            "mean_output_tokens": sum(lengths) / max(len(lengths), 1),
            "mean_source_tokens": sum(source_lengths) / max(len(source_lengths), 1),
            "outputs_at_max_length": at_limit,
            "peak_memory_allocated_gib": peak,
            "first_output": outputs[0] if outputs else None,
        }
        if references is not None:
            import sacrebleu

            entry["sacrebleu"] = sacrebleu.corpus_bleu(outputs, [references]).score
        result["by_precision"][precision] = entry
        write_json(spec["result"], result)


def compare(path_a: str, path_b: str, out: str) -> None:
    """(b): are the two checkpoints' model tensors bitwise equal (`torch.equal`)?"""
    from transformer.checkpoint import read_checkpoint

    a, b = read_checkpoint(path_a), read_checkpoint(path_b)
    names = sorted(set(a["model"]) | set(b["model"]))
    model_a, model_b = a["model"], b["model"]
    same = {n: n in model_a and n in model_b and torch.equal(model_a[n], model_b[n]) for n in names}
    gaps = [
        float((model_a[n].double() - model_b[n].double()).abs().max())
        for n in names
        if not same[n] and n in model_a and n in model_b
    ]
    result = {
        "bit_identical": all(same.values()) and a["step"] == b["step"],
        "steps": [a["step"], b["step"]],
        "tensors": len(names),
        "different_tensors": [n for n in names if not same[n]][:20],
        "largest_difference": max(gaps, default=0.0),
    }
    write_json(out, result)


def main(argv: list[str] | None = None) -> int:
    """Run one worker command (see the module docstring); returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    commands = {"versions": versions, "train": train, "decode": decode, "compare": compare}
    commands["attention"] = attention_shapes
    if not argv or argv[0] not in commands:
        print(f"usage: gpu_check_worker {{{','.join(commands)}}} ARGS...", file=sys.stderr)
        return 2
    commands[argv[0]](*argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
