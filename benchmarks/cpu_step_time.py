"""Time one training step of a config's model on the CPU: precision, denormals, kernels.

    python benchmarks/cpu_step_time.py --config configs/multi30k.yaml [--threads 2] [--steps 5]
    python -m benchmarks.cpu_step_time --config configs/multi30k.yaml [--threads 2] [--steps 5]

For each combination of precision (float32, bf16 autocast), `torch.set_flush_denormal` (on, off),
attention kernel (sdpa, math), dropout mask ("torch": `nn.Dropout`'s; "cpu": the trainer's
`CPUDropout`, `transformer/cpu/dropout.py`) and linear kernel (`train.linear_kernel`: "torch"
keeps the plain `torch.nn.Linear` layers, computed by MKL; "auto" swaps them for oneDNN ones by
`swap_linear_layers` where the trainer would, i.e. in float32 on an x86-64 CPU,
`transformer/cpu/onednn.py`), runs warm-up steps and then times full training steps (forward,
label-smoothed loss, backward, Adam) on the same random batch, alternating the settings round by
round and reporting the median. glibc keeps freed memory as in the trainer
(`train.keep_freed_memory` of the config). The batch has the shape of a real Multi30k batch at
`train.max_tokens` (about 15 tokens per sentence).

Denormals: float32 values below 1.2e-38 are processed far more slowly by x86 CPUs unless they
are flushed to zero. Random weights rarely produce them, so `--checkpoint` starts from a real
training checkpoint (its weights and Adam state) and `--denormal-state` seeds the Adam moments
with denormal values.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as `python benchmarks/cpu_step_time.py`, not with -m:
    # import from the repo root, and take benchmarks/ off sys.path before torch is imported
    # (its cuda.py would shadow NVIDIA's `cuda` package, which torch imports if present)
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [str(_HERE.parent), *(p for p in sys.path if p != str(_HERE))]

import torch  # noqa: E402

from transformer.checkpoint import read_checkpoint  # noqa: E402
from transformer.config import RETIRED_KEYS, load_config  # noqa: E402
from transformer.cpu.dropout import swap_dropout_layers  # noqa: E402
from transformer.cpu.malloc import keep_freed_memory  # noqa: E402
from transformer.cpu.onednn import swap_linear_layers, use_onednn  # noqa: E402
from transformer.model.config import ModelConfig  # noqa: E402
from transformer.model.transformer import Transformer  # noqa: E402
from transformer.train.loss import label_smoothed_cross_entropy  # noqa: E402

LINEAR_KERNELS = ("torch", "auto")  # the values of train.linear_kernel this script times
DROPOUTS = ("torch", "cpu")  # nn.Dropout's masks, the trainer's CPUDropout


def make_step(config, kernels, bf16: bool, denormal_state: bool, batch, checkpoint=None):
    """Build a model + optimizer (from `checkpoint` if given) and return a one-step function.

    Args:
        config: The run's `Config` (its model section, unless `checkpoint` is given).
        kernels: (attention kernel, dropout, linear kernel): the `model.attention_kernel`
            value, "torch" or "cpu" (the dropout layers swapped for `CPUDropout`, as the
            trainer does) and the `train.linear_kernel` value; the linear layers are swapped for
            oneDNN ones when `use_onednn` says so for this precision, as the trainer does.
        bf16: Train under bf16 autocast.
        denormal_state: Fill the Adam moments with denormal values after the first step.
        batch: (src, tgt_in, tgt_out) token ids.
        checkpoint: A training checkpoint (`read_checkpoint`) to start from.

    Returns:
        step() running one training step (forward, loss, backward, Adam), and whether the
        model's linear layers were swapped.
    """
    torch.manual_seed(0)
    model_config = config.model
    if checkpoint is not None:  # older checkpoints also store model.linear_kernel: dropped
        stored = checkpoint["model_config"]
        model_config = ModelConfig(
            **{k: v for k, v in stored.items() if k not in RETIRED_KEYS["model"]}
        )
    attention_kernel, dropout, linear_kernel = kernels
    model = Transformer(
        dataclasses.replace(model_config, vocab_size=8000, attention_kernel=attention_kernel)
    )
    precision = "bf16" if bf16 else "fp32"
    swapped = use_onednn(linear_kernel, torch.device("cpu"), precision)
    if swapped:
        swap_linear_layers(model)  # same parameters: the checkpoint below loads unchanged
    if dropout == "cpu":
        swap_dropout_layers(model)
    optimizer = torch.optim.Adam(
        model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True
    )  # as transformer.train.optim.build_optimizer
    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
    src, tgt_in, tgt_out = batch

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(src, tgt_in)
        out = label_smoothed_cross_entropy(logits, tgt_out, 0.1, 0)
        (out.loss / out.n_tokens).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()
    if denormal_state:
        for state in optimizer.state.values():
            state["exp_avg"].fill_(1e-39)
            state["exp_avg_sq"].fill_(1e-39)
    return step, swapped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/multi30k.yaml")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3, help="timed rounds per setting")
    parser.add_argument("--denormal-state", action="store_true")
    parser.add_argument("--checkpoint", help="start from this training checkpoint (8000 vocab)")
    parser.add_argument("--flush", default="on,off", help="denormal flushing settings to time")
    parser.add_argument(
        "--linear-kernels",
        default="torch,auto",
        help="train.linear_kernel values to time: torch (plain layers), auto (oneDNN swap)",
    )
    parser.add_argument(
        "--dropouts",
        default="torch,cpu",
        help="dropout masks to time: torch (nn.Dropout), cpu (the trainer's CPUDropout)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="then profile 3 steps of each setting (torch.profiler): its N costliest operators",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = load_config(args.config)
    if config.train.keep_freed_memory:
        keep_freed_memory()  # as the trainer (transformer/cpu/malloc.py)
    checkpoint = read_checkpoint(args.checkpoint) if args.checkpoint else None
    sentences = config.train.max_tokens // 17
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, 8000, (sentences, 16), generator=generator)
    tgt = torch.randint(4, 8000, (sentences, 17), generator=generator)
    tgt[:, 0] = 2
    batch = (src, tgt[:, :-1], tgt[:, 1:])
    if not set(args.flush.split(",")) <= {"on", "off"}:
        parser.error(f"--flush ({args.flush!r}) must be 'on', 'off' or 'on,off'")
    flushes = [f == "on" for f in args.flush.split(",")]
    if not set(args.linear_kernels.split(",")) <= set(LINEAR_KERNELS):
        parser.error(f"--linear-kernels ({args.linear_kernels!r}) must be 'torch', 'auto' or both")
    if not set(args.dropouts.split(",")) <= set(DROPOUTS):
        parser.error(f"--dropouts ({args.dropouts!r}) must be 'torch', 'cpu' or both")
    settings = [
        (precision, flush, kernel, dropout, linear)
        for precision in ("fp32", "bf16")
        for flush in flushes
        for kernel in ("sdpa", "math")
        for dropout in args.dropouts.split(",")
        for linear in args.linear_kernels.split(",")
    ]
    steps, swapped = {}, {}
    for key in settings:
        torch.set_flush_denormal(key[1])
        steps[key], swapped[key] = make_step(
            config, key[2:], key[0] == "bf16", args.denormal_state, batch, checkpoint
        )
    times = {key: [] for key in settings}
    for _ in range(args.steps):
        for key in settings:  # alternate the settings round by round
            torch.set_flush_denormal(key[1])
            start = time.perf_counter()
            steps[key]()
            times[key].append(time.perf_counter() - start)
    tokens = int((batch[2] != 0).sum())
    print(
        f"{sentences} sentences x 16/17 tokens, {tokens} target tokens, "
        f"{args.threads} threads, denormal state: {args.denormal_state}"
    )
    print(
        f"{'precision':<10}{'flush':<7}{'attention':<10}{'dropout':<8}{'linear':<8}{'oneDNN':<8}"
        f"{'ms/step':>9}{'tok/s':>9}"
    )
    for key in settings:
        median = statistics.median(times[key])
        precision, flush, kernel, dropout, linear = key
        onednn = "swapped" if swapped[key] else "-"
        print(
            f"{precision:<10}{str(flush):<7}{kernel:<10}{dropout:<8}{linear:<8}{onednn:<8}"
            f"{median * 1000:>9.0f}{tokens / median:>9.0f}"
        )
    for key in settings if args.profile > 0 else []:
        torch.set_flush_denormal(key[1])
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            for _ in range(3):
                steps[key]()
        table = profile.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.profile)
        print(f"\n{' '.join(map(str, key))}: 3 steps\n{table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
