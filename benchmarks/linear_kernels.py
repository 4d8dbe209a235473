"""Time the model's float32 CPU products with PyTorch's default (MKL) and with oneDNN.

    python benchmarks/linear_kernels.py [--threads 2] [--rounds 7]
    python -m benchmarks.linear_kernels [--threads 2] [--rounds 7]

For each product shape of the base model (W^Q/W^K/W^V/W^O, W_1, W_2 and the output projection,
at a training batch of 512 rows and at one greedy decoding step of 8 rows), times a plain
`torch.nn.Linear` (`torch.nn.functional.linear`, "torch") and the same layer swapped for
`OneDNNLinear` by `swap_linear_layers` (`transformer/cpu/onednn.py`, "oneDNN"), forward and
forward + backward, on the same weights and inputs, alternating the kernels round by round, and
prints the medians, their ratio and the largest difference of the outputs. This is the
measurement behind `train.linear_kernel: auto` (the figures are in BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as `python benchmarks/linear_kernels.py`, not with -m:
    # import from the repo root, and take benchmarks/ off sys.path before torch is imported
    # (its cuda.py would shadow NVIDIA's `cuda` package, which torch imports if present)
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [str(_HERE.parent), *(p for p in sys.path if p != str(_HERE))]

import torch  # noqa: E402
from torch import nn  # noqa: E402

from transformer.cpu.onednn import onednn_available, swap_linear_layers  # noqa: E402

SHAPES = (  # (name, out features O, in features I)
    ("W^Q, W^K, W^V, W^O", 512, 512),
    ("W_1 (equation 2)", 2048, 512),
    ("W_2 (equation 2)", 512, 2048),
    ("output projection", 37000, 512),
)


def time_call(fn, rounds: int) -> float:
    """Median wall seconds of `fn()` over `rounds` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(out_features: int, in_features: int, rows: int, rounds: int) -> dict[str, float]:
    """Forward and forward + backward seconds of both kernels for one product shape.

    Args:
        out_features, in_features: The weight's O x I.
        rows: Input rows (tokens in a batch, or sentences x beams in a decoding step).
        rounds: Timed calls per kernel, alternating the kernels.

    Returns:
        {"forward_torch", "forward_onednn", "train_torch", "train_onednn"} median seconds, and
        "max_abs_diff" between the two outputs.

    Raises:
        RuntimeError: when the swapped layer would not compute with oneDNN here.

    Shape:
        input: (rows, I). weight: (O, I). output: (rows, O).
    """
    torch.manual_seed(0)
    layers = {k: nn.Linear(in_features, out_features) for k in ("torch", "onednn")}
    layers["onednn"].load_state_dict(layers["torch"].state_dict())  # the same weights
    swap_linear_layers(layers["onednn"])  # now an OneDNNLinear; "torch" stays nn.Linear
    x = torch.randn(rows, in_features, requires_grad=True)
    if not layers["onednn"].uses_onednn(x):
        raise RuntimeError("the swapped layer would compute with torch.nn.functional.linear")
    grad = torch.randn(rows, out_features)
    result = {}
    with torch.no_grad():
        outputs = {k: layer(x) for k, layer in layers.items()}
    result["max_abs_diff"] = float((outputs["torch"] - outputs["onednn"]).abs().max())
    forward = {k: [] for k in layers}
    train = {k: [] for k in layers}
    for _ in range(rounds):  # alternate the kernels round by round
        for kernel, layer in layers.items():
            with torch.no_grad():
                forward[kernel].append(time_call(lambda layer=layer: layer(x), 1))
            train[kernel].append(time_call(lambda layer=layer: layer(x).backward(grad), 1))
    for kernel in layers:
        result[f"forward_{kernel}"] = statistics.median(forward[kernel])
        result[f"train_{kernel}"] = statistics.median(train[kernel])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    if args.threads < 1 or args.rounds < 1:
        parser.error("--threads and --rounds must be at least 1")
    if not onednn_available():
        print("this PyTorch build has no oneDNN linear operator: nothing to compare")
        return 1
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, median of {args.rounds} rounds")
    header = f"{'product':<20}{'O x I':>12}{'rows':>6}"
    print(
        f"{header}{'fwd torch':>11}{'oneDNN':>9}{'ratio':>7}{'f+b torch':>11}{'oneDNN':>9}"
        f"{'ratio':>7}{'max|diff|':>11}"
    )
    for name, out_features, in_features in SHAPES:
        for rows in (512, 8):
            r = measure(out_features, in_features, rows, args.rounds)
            print(
                f"{name:<20}{f'{out_features}x{in_features}':>12}{rows:>6}"
                f"{r['forward_torch'] * 1e3:>9.2f}ms{r['forward_onednn'] * 1e3:>7.2f}ms"
                f"{r['forward_torch'] / r['forward_onednn']:>7.2f}"
                f"{r['train_torch'] * 1e3:>9.2f}ms{r['train_onednn'] * 1e3:>7.2f}ms"
                f"{r['train_torch'] / r['train_onednn']:>7.2f}{r['max_abs_diff']:>11.1e}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
