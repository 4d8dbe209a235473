"""oneDNN for the model's float32 CPU matrix products: a switch applied after the model is built.

Every learned projection of the paper (W^Q, W^K, W^V, W^O, W_1, W_2 and the pre-softmax
projection) is a `torch.nn.Linear`. On CPU, `torch.nn.functional.linear` computes float32
products with MKL, which on some x86-64 CPUs (the AMD Zen 5 of our benchmarks) does not take its
fastest path; oneDNN, which ships inside PyTorch (`torch.ops.mkldnn`, a private operator), computes
the same float32 sums in another order (they agree to about 1e-6 relative) and faster. The measured
figures are in BENCHMARKS.md (`benchmarks/linear_kernels.py`).

The model itself never knows: it is built from plain `nn.Linear` layers, and

- `swap_linear_layers(model)` turns them into `OneDNNLinear` in place (same parameters, names,
  state_dict and hooks; tied weights stay tied), `restore_linear_layers(model)` undoes it, and
  `onednn_linear_layers(model, enabled)` makes the layers oneDNN ones (or plain ones) for the
  duration of a block;
- `prepacked_weights(model)` reorders each swapped layer's weight once into oneDNN's blocked
  layout for the duration of a search (inference only; one extra copy of the weights meanwhile);
- `use_onednn(kernel, device, precision, compile)` is the policy: "torch" never, "auto" for
  float32 on x86-64 CPUs outside `torch.compile` when this build has the operator, "onednn"
  wherever it can apply (an error elsewhere).

The trainer swaps the layers of the model it trains (`train.linear_kernel`); `Translator` swaps
and prepacks for each call (`linear_kernel` argument). A swapped layer computes with
`torch.nn.functional.linear` whenever oneDNN does not apply (CUDA, autocast, `torch.compile`).
Higher derivatives stay exact (a recorded backward pass uses differentiable products);
`torch.func` transforms and `torch.jit.trace` need plain layers (`restore_linear_layers`).
"""

from __future__ import annotations

import contextlib
import functools
import platform
from collections.abc import Iterator

import torch
from torch import nn
from torch.nn import functional as F

LINEAR_KERNELS = ("auto", "onednn", "torch")

# Row-count hint for oneDNN's weight reordering: any count works at run time; the hint only
# picks the blocked layout.
PACKING_ROWS_HINT = 64

# Fewer rows than this per decoding step (sentences x beams): the reordering costs more than it
# saves (see BENCHMARKS.md).
MIN_PACKING_ROWS = 4


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


def use_onednn(
    kernel: str, device: torch.device, precision: str = "fp32", compile: bool = False
) -> bool:
    """Whether a job with these settings should swap its linear layers for `OneDNNLinear`.

    Args:
        kernel: "auto", "onednn" or "torch" (`LINEAR_KERNELS`).
        device: Where the model runs.
        precision: "fp32", "bf16" or "fp16" (oneDNN computes float32 products only).
        compile: Whether the model runs through torch.compile.

    Returns:
        True for "onednn", and for "auto" on an x86-64 CPU; False for "torch".

    Raises:
        ValueError: for an unknown kernel, or "onednn" where it cannot apply (a GPU, bf16/fp16,
            torch.compile, or a build without the operator).
    """
    if kernel not in LINEAR_KERNELS:
        raise ValueError(f"linear kernel ({kernel!r}) must be one of {', '.join(LINEAR_KERNELS)}")
    fits = device.type == "cpu" and precision == "fp32" and not compile and onednn_available()
    if kernel == "onednn" and not fits:
        found = "found" if onednn_available() else "missing"
        raise ValueError(
            "linear kernel 'onednn' computes float32 products on the CPU outside torch.compile, "
            f"but this job runs in {precision} on {device}"
            f"{' with torch.compile' if compile else ''} (oneDNN operator {found}); "
            "use 'auto' (oneDNN where it applies) or 'torch'"
        )
    if kernel == "auto":
        return fits and x86_64()
    return kernel == "onednn"


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


def _weight_key(weight: torch.Tensor) -> tuple[int, int]:
    """Identifies a weight's current values: storage address and in-place version counter."""
    return weight.data_ptr(), weight._version


class OneDNNLinear(nn.Linear):
    """A `torch.nn.Linear` whose float32 CPU products are computed by oneDNN.

    Made by `swap_linear_layers` from an existing layer (never constructed directly), so its
    parameters, state_dict keys and initialisation are those of `torch.nn.Linear`. Input that
    oneDNN does not take (CUDA, other dtypes, autocast, `torch.compile`, empty products) goes to
    `torch.nn.functional.linear`. Inside `prepacked_weights`, inference uses a weight reordered
    once for oneDNN, unless the weight changed since (it is then computed from the live weight).

    Shape:
        input: (..., I). output: (..., O).
    """

    _packed: tuple | None = None  # (weight for oneDNN, _weight_key), set by prepacked_weights

    def uses_onednn(self, x: torch.Tensor) -> bool:
        """Whether `forward(x)` computes with oneDNN (see the class docstring)."""
        return (
            x.numel() > 0
            and x.device.type == "cpu"
            and x.dtype == torch.float32
            and self.weight.dtype == torch.float32
            and x.layout == torch.strided
            and not torch.is_autocast_enabled("cpu")
            and not torch.compiler.is_compiling()
            and onednn_available()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x W^T + b: (..., I) -> (..., O)."""
        if not self.uses_onednn(x):
            return F.linear(x, self.weight, self.bias)
        packed = self._packed
        if (
            packed is not None
            and not torch.is_grad_enabled()
            and packed[1] == _weight_key(self.weight)  # still the packed values
        ):
            return _onednn_matmul(x, packed[0], self.bias)  # (..., I) -> (..., O)
        return _OneDNNLinearFunction.apply(x, self.weight, self.bias)

    def _pack(self) -> torch.Tensor | None:
        """The weight reordered for oneDNN, or None where this layer would not use oneDNN."""
        w = self.weight.detach()
        if w.numel() == 0 or not self.uses_onednn(w.new_empty((1, self.in_features))):
            return None
        try:
            return torch.ops.mkldnn._reorder_linear_weight(w, PACKING_ROWS_HINT)
        except (AttributeError, RuntimeError):  # a build without the reorder operator
            return None

    def __getstate__(self) -> dict:
        """Copies and pickles never carry the packed weight (an opaque oneDNN tensor)."""
        state = dict(self.__dict__)
        state.pop("_packed", None)
        return state


def swap_linear_layers(model: nn.Module) -> list[nn.Module]:
    """Make every plain `nn.Linear` of `model` an `OneDNNLinear`, in place.

    The layers keep their identity, parameters (tied ones stay tied), state_dict keys and hooks:
    only their class changes, so optimizers, DistributedDataParallel and checkpoints see the same
    model. Layers of other `nn.Linear` subclasses are left alone.

    Args:
        model: Usually a `transformer.model.Transformer`.

    Returns:
        The layers that were swapped (for `restore_linear_layers`).
    """
    swapped = [m for m in model.modules() if type(m) is nn.Linear]
    for layer in swapped:
        layer.__class__ = OneDNNLinear  # same module, another forward
    return swapped


def restore_linear_layers(model: nn.Module, layers: list[nn.Module] | None = None) -> None:
    """Make `layers` (default: every `OneDNNLinear` of `model`) plain `nn.Linear` again."""
    for layer in layers if layers is not None else list(model.modules()):
        if type(layer) is OneDNNLinear:
            layer.__dict__.pop("_packed", None)
            layer.__class__ = nn.Linear


@contextlib.contextmanager
def onednn_linear_layers(model: nn.Module, enabled: bool = True) -> Iterator[None]:
    """Within the block, the linear layers of `model` compute with oneDNN iff `enabled`.

    Enabled, plain `nn.Linear` layers become `OneDNNLinear`; disabled (the caller's policy said
    no), `OneDNNLinear` layers, e.g. of a model the trainer swapped, become plain ones. On exit,
    also on an exception, every layer changed is back to what it was.

    Args:
        model: The model.
        enabled: Whether its linear layers should be `OneDNNLinear` within the block.
    """
    if enabled:
        changed = swap_linear_layers(model)
    else:
        changed = [m for m in model.modules() if type(m) is OneDNNLinear]
        restore_linear_layers(model, changed)
    try:
        yield
    finally:
        if enabled:
            restore_linear_layers(model, changed)
        else:
            for layer in changed:
                layer.__class__ = OneDNNLinear  # as `swap_linear_layers` made it


@contextlib.contextmanager
def prepacked_weights(model: nn.Module, rows: int | None = None) -> Iterator[None]:
    """Within the block, `OneDNNLinear` layers of `model` use weights reordered once for oneDNN.

    For inference: the packed copies are taken on entry, used by forward passes without
    gradient recording, and dropped on exit (also on an exception or Ctrl-C). A layer whose
    weight has been replaced or modified in place since its packing (a new state_dict, an
    optimizer step, a pruning hook) computes from the live weight instead. Nested blocks reuse
    the outer packing. Plain `nn.Linear` layers, and searches with fewer than
    `MIN_PACKING_ROWS` rows, are left as they are.

    Args:
        model: Usually a `Transformer` after `swap_linear_layers`.
        rows: Rows per decoding step (sentences x beams), if known.
    """
    if rows is not None and rows < MIN_PACKING_ROWS:
        yield
        return
    packed = []
    try:
        for layer in model.modules():
            if isinstance(layer, OneDNNLinear) and layer._packed is None:
                weight = layer._pack()
                if weight is not None:
                    packed.append(layer)
                    layer._packed = (weight, _weight_key(layer.weight))
        yield
    finally:
        for layer in packed:
            layer._packed = None
