"""Time the model's float32 CPU products with PyTorch's default (MKL) and with oneDNN.

    python benchmarks/linear_kernels.py [--threads 2] [--rounds 7]

For each product shape of the base model (W^Q/W^K/W^V/W^O, W_1, W_2 and the output projection,
at a training batch of 512 rows and at one greedy decoding step of 8 rows), times
`transformer.linear.Linear` with `kernel="torch"` (`torch.nn.functional.linear`) and with
`kernel="onednn"`, forward and forward + backward, on the same weights and inputs, alternating
the kernels round by round, and prints the medians, their ratio and the largest difference of
the outputs. This is the measurement behind `model.linear_kernel: auto` (see BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from transformer.cpu.onednn import Linear, onednn_available

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

    Shape:
        input: (rows, I). weight: (O, I). output: (rows, O).
    """
    torch.manual_seed(0)
    layers = {k: Linear(in_features, out_features, kernel=k) for k in ("torch", "onednn")}
    layers["onednn"].load_state_dict(layers["torch"].state_dict())
    x = torch.randn(rows, in_features, requires_grad=True)
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
