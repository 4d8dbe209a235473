"""The model's affine maps x W^T + b, with a choice of CPU matrix-multiply library.

Every learned projection of the paper (W^Q, W^K, W^V, W^O in section 3.2.2, W_1 and W_2 of
equation 2, the pre-softmax projection of section 3.4) is an affine map. On CPU, PyTorch's
`torch.nn.functional.linear` calls MKL's float32 GEMM; the same float32 product computed by
oneDNN (which ships inside PyTorch, under `torch.ops.mkldnn`) ran 1.8-2.1x faster forward and
1.5-2x faster forward + backward at training sizes on the AMD EPYC (Zen 5) CPU of our
benchmarks, where MKL does not use its fastest code path (`scripts/linear_kernels.py`).
`Linear` therefore computes float32 products on x86-64 CPUs with oneDNN ("auto"), and
everything else (other CPUs, CUDA, bf16/fp16 autocast, `torch.compile`) with
`torch.nn.functional.linear`. Both compute the same float32 sums, in a different order
(they agree to about 1e-6 relative); `kernel="torch"` always uses PyTorch's default.
For decoding, `prepacked_weights(model)` reorders each weight once into oneDNN's blocked
layout for the duration of a search (greedy or beam search run inside it), which made greedy
decoding 1.5x and beam-4 decoding 1.2x faster still; it keeps one packed copy of the weights
while it lasts. Higher derivatives (double backward, Hessians) are exact: a recorded backward
pass uses PyTorch's differentiable products. `torch.func` transforms (vmap, jacrev) and
`torch.jit.trace` need `kernel="torch"`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import platform
from collections.abc import Iterator

import torch
from torch import nn
from torch.nn import functional as F

KERNELS = ("auto", "onednn", "torch")


@functools.lru_cache(maxsize=1)
def onednn_available() -> bool:
    """Whether this PyTorch build has oneDNN's float32 linear operator for CPU tensors."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        op = torch.ops.mkldnn._linear_pointwise
        out = op(torch.ones(2, 3), torch.ones(4, 3), torch.zeros(4), "none", [], "")
    except (AttributeError, RuntimeError):
        return False
    return out.shape == (2, 4) and bool(torch.all(out == 3.0))


@functools.lru_cache(maxsize=1)
def x86_64() -> bool:
    """Whether this is an x86-64 CPU, where "auto" uses oneDNN (measured on AMD Zen 5)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def _onednn_matmul(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """x w^T + b by oneDNN. Shape: x (..., I), w (O, I), b (O,); output (..., O)."""
    return torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], "")


class _OneDNNLinearFunction(torch.autograd.Function):
    """y = x W^T + b with oneDNN products in the forward and the backward pass.

    Backward: dL/dx = g W, dL/dW = g^T x, dL/db = sum of g over positions (the same
    formulas as `torch.nn.functional.linear`'s autograd). When the backward pass itself is
    recorded (`create_graph=True`: double backward, Hessians), it uses PyTorch's differentiable
    matrix products instead, so higher derivatives stay exact.
    """

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _onednn_matmul(x, weight, bias)  # (..., I) -> (..., O)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        differentiable = torch.is_grad_enabled()  # create_graph=True: record this pass too
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            if differentiable:
                grad_x = grad @ weight  # (..., O) @ (O, I) -> (..., I)
            else:
                grad_x = _onednn_matmul(grad, weight.t(), None)  # (..., O) @ (O, I) -> (..., I)
        grad_2d = grad.reshape(-1, grad.shape[-1])  # (..., O) -> (N, O)
        if ctx.needs_input_grad[1]:
            x_2d = x.reshape(-1, x.shape[-1])  # (..., I) -> (N, I)
            if differentiable:
                grad_w = grad_2d.t() @ x_2d  # (O, N) @ (N, I) -> (O, I)
            else:
                grad_w = _onednn_matmul(grad_2d.t(), x_2d.t(), None)  # (O, N) @ (N, I) -> (O, I)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad_2d.sum(0)  # (N, O) -> (O,)
        return grad_x, grad_w, grad_b


# Row-count hint for oneDNN's weight reordering: any count works at run time; the hint only
# picks the blocked layout (8, 32 and 512 measured alike for decoding; 1 was slower).
PACKING_ROWS_HINT = 64


# Fewer rows than this per decoding step (sentences x beams): the reordering costs more than it
# saves (measured at base size: 1 sentence greedy was slower packed, 1 sentence x 4 beams even).
MIN_PACKING_ROWS = 4


def _weight_key(weight: torch.Tensor) -> tuple[int, int]:
    """Identifies a weight's current values: storage address and in-place version counter."""
    return weight.data_ptr(), weight._version


@contextlib.contextmanager
def prepacked_weights(model, rows: int | None = None) -> Iterator[None]:
    """Within the block, `Linear` layers of `model` use weights reordered once for oneDNN.

    For inference: the packed copies are taken on entry, used by forward passes without
    gradient recording, and dropped on exit (also on an exception or Ctrl-C). A layer whose
    weight has been replaced or modified in place since its packing (a new state_dict, an
    optimizer step, a pruning hook) computes from the live weight instead. Nested blocks reuse
    the outer packing. A model that is not an `nn.Module`, layers that would not use oneDNN,
    and searches with fewer than `MIN_PACKING_ROWS` rows are left as they are.

    Args:
        model: Usually a `Transformer`.
        rows: Rows per decoding step (sentences x beams), if known.
    """
    if not isinstance(model, nn.Module) or (rows is not None and rows < MIN_PACKING_ROWS):
        yield
        return
    packed = []
    try:
        for layer in model.modules():
            if isinstance(layer, Linear) and layer._packed is None:
                weight = layer._pack()
                if weight is not None:
                    packed.append(layer)
                    layer._packed = (weight, _weight_key(layer.weight))
        yield
    finally:
        for layer in packed:
            layer._packed = None


def searches_with_prepacked_weights(search):
    """Decorator: run `search(model, src, ..., beam_size=K)` inside `prepacked_weights`.

    The rows per step are src's batch size times `beam_size` (1 when the search has none).
    """
    signature = inspect.signature(search)

    @functools.wraps(search)
    def run(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        src = bound.arguments["src"]
        rows = src.shape[0] * bound.arguments.get("beam_size", 1)
        with prepacked_weights(bound.arguments["model"], rows):
            return search(*args, **kwargs)

    return run


class Linear(nn.Linear):
    """`torch.nn.Linear` (same parameters, names and initialisation) with a kernel choice.

    Args:
        in_features: Input width I.
        out_features: Output width O.
        bias: Learn an additive bias b.
        kernel: "auto" (oneDNN for float32 tensors on x86-64 CPUs outside autocast and
            `torch.compile`, when this build has it; `torch.nn.functional.linear` otherwise),
            "onednn" (oneDNN on any CPU; an error where it cannot be used), or "torch" (always
            `torch.nn.functional.linear`). Inside `prepacked_weights`, inference uses a weight
            reordered once for oneDNN.

    Shape:
        input: (..., I). output: (..., O).

    Raises:
        ValueError: for an unknown kernel, or with "onednn" on input oneDNN cannot take.
    """

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, kernel: str = "auto"
    ) -> None:
        if kernel not in KERNELS:
            raise ValueError(f"linear kernel ({kernel!r}) must be one of {', '.join(KERNELS)}")
        super().__init__(in_features, out_features, bias=bias)
        self.kernel = kernel
        self._packed: tuple | None = None  # (weight for oneDNN, _weight_key), by prepacked_weights

    def _pack(self) -> torch.Tensor | None:
        """The weight reordered for oneDNN, or None where this layer would not use oneDNN."""
        w = self.weight.detach()
        probe = w.new_empty((1, self.in_features))
        try:
            if w.numel() == 0 or not self.uses_onednn(probe):
                return None
        except ValueError:  # kernel "onednn" on weights it cannot take: forward will say so
            return None
        try:
            return torch.ops.mkldnn._reorder_linear_weight(w, PACKING_ROWS_HINT)
        except (AttributeError, RuntimeError):  # a build without the reorder operator
            return None

    def uses_onednn(self, x: torch.Tensor) -> bool:
        """Whether `forward(x)` computes with oneDNN (see the class docstring)."""
        if self.kernel == "torch" or x.numel() == 0:  # oneDNN rejects empty products
            return False
        fits = (
            x.device.type == "cpu"
            and x.dtype == torch.float32
            and self.weight.dtype == torch.float32
            and x.layout == torch.strided
            and not torch.is_autocast_enabled("cpu")
            and not torch.compiler.is_compiling()
            and onednn_available()
        )
        if self.kernel == "auto":
            return fits and x86_64()  # measured there; elsewhere PyTorch's BLAS is kept
        if not fits:
            autocast = "on" if torch.is_autocast_enabled("cpu") else "off"
            found = "found" if onednn_available() else "missing"
            raise ValueError(
                "linear kernel 'onednn' needs float32 CPU input and weights outside autocast "
                "and torch.compile, on a PyTorch build with oneDNN (got input "
                f"{x.dtype} on {x.device}, weight {self.weight.dtype}, CPU autocast "
                f"{autocast}, oneDNN {found})"
                "; use kernel 'auto' to fall back to torch.nn.functional.linear"
            )
        return fits

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x W^T + b: (..., I) -> (..., O)."""
        if self.uses_onednn(x):
            packed = self._packed
            if (
                packed is not None
                and not torch.is_grad_enabled()
                and packed[1] == _weight_key(self.weight)  # still the packed values
            ):
                return _onednn_matmul(x, packed[0], self.bias)  # (..., I) -> (..., O)
            return _OneDNNLinearFunction.apply(x, self.weight, self.bias)
        return F.linear(x, self.weight, self.bias)

    def __getstate__(self) -> dict:
        """Copies and pickles never carry the packed weight (an opaque oneDNN tensor)."""
        return {**self.__dict__, "_packed": None}

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, kernel={self.kernel}"
