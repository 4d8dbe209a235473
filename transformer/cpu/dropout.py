"""A faster dropout mask for CPU training: a switch applied after the model is built.

The paper's residual dropout (section 5.4) is `torch.nn.Dropout` in the model. On the CPU,
`torch.nn.functional.dropout` draws its mask with `Tensor.bernoulli_`, which takes about twice
as long as drawing uniform numbers with `torch.rand` and comparing them with 1 - p: in a
training step of `configs/multi30k.yaml` on one core, the masks were the largest cost after the
matrix products (BENCHMARKS.md, "CPU training: where a step's time goes").

The model itself never knows: `swap_dropout_layers(model)` turns its plain `nn.Dropout` layers
into `CPUDropout` in place (same modules; dropout has no parameters or state), and the trainer
does so for CPU training outside `torch.compile` (which draws its own masks). `CPUDropout`
computes the same function as `nn.Dropout`: each element is kept with probability 1 - p and
scaled by 1 / (1 - p), and it is the identity in eval mode. Only the random numbers differ, so
a run with it is as deterministic as one without it (same seed, same masks), but its masks are
not those of plain `nn.Dropout`.
"""

from __future__ import annotations

import torch
from torch import nn


class CPUDropout(nn.Dropout):
    """`nn.Dropout` whose CPU training mask is `torch.rand(...) < 1 - p` (section 5.4).

    A CPU tensor in training mode, with 0 < p < 1 and `inplace` off, is multiplied by a mask
    of kept elements (probability 1 - p each, from the default CPU generator) scaled by
    1 / (1 - p); everything else goes to `nn.Dropout.forward`.

    Shape:
        Input: any shape; output: the same.
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not self.training or self.inplace or not 0.0 < self.p < 1.0 or not input.is_cpu:
            return super().forward(input)
        keep = 1.0 - self.p
        uniform = torch.rand(input.shape, dtype=torch.float32)  # (...) in [0, 1), as input
        mask = (uniform < keep).to(input.dtype).mul_(1.0 / keep)  # 1 / (1 - p) where kept
        return input * mask


def swap_dropout_layers(model: nn.Module) -> list[nn.Module]:
    """Make every plain `nn.Dropout` of `model` a `CPUDropout`, in place.

    Args:
        model: Usually a `transformer.model.Transformer`.

    Returns:
        The layers that were swapped; subclasses of `nn.Dropout` are left alone.
    """
    swapped = [m for m in model.modules() if type(m) is nn.Dropout]
    for layer in swapped:
        layer.__class__ = CPUDropout  # same module, another forward
    return swapped
