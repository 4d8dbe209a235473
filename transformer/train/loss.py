"""Label-smoothed cross-entropy (section 5.4 of the paper, epsilon_ls = 0.1).

The paper only says "we employed label smoothing of value epsilon_ls = 0.1" (citing Szegedy et
al., 2016). This module makes the two choices the paper leaves open explicit:

- **Where the smoothing mass goes: every class except padding.** The target distribution of a
  real token y is

      q(k) = (1 - eps) * [k == y] + eps / (V - 1) * [k != pad]

  i.e. the true class keeps 1 - eps and eps is spread uniformly over the V - 1 non-padding
  classes (the true class included, so it ends with 1 - eps + eps / (V - 1)). The padding id is
  never a correct output, so it receives no mass. (`torch.nn.functional.cross_entropy` with
  `label_smoothing` spreads eps over all V classes instead, padding included.)
- **Padding positions contribute nothing**, and the loss is returned as a *sum* over real target
  tokens together with their count. The caller divides by the number of real target tokens of
  the whole update (all accumulated micro-batches on all ranks), so that one batch and the same
  batch split into micro-batches give the same gradient.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F


class LossOutput(NamedTuple):
    """Sums over the real (non-padding) target tokens of a batch.

    Attributes:
        loss: Label-smoothed cross-entropy summed over real tokens (scalar, float32); the
            training objective.
        nll_loss: Plain negative log-likelihood of the reference summed over real tokens
            (scalar, float32, no gradient); exp(nll_loss / n_tokens) is the perplexity.
        n_tokens: Number of real target tokens (scalar int64 tensor; a tensor rather than an
            int so that computing the loss never waits for the GPU).
    """

    loss: torch.Tensor
    nll_loss: torch.Tensor
    n_tokens: torch.Tensor


def label_smoothed_cross_entropy(
    logits: torch.Tensor, target: torch.Tensor, epsilon: float = 0.1, pad_id: int = 0
) -> LossOutput:
    """Label-smoothed cross-entropy summed over the real tokens (section 5.4).

    For each real target token y with model log-probabilities log p:

        loss = -(1 - eps) * log p(y) - eps / (V - 1) * sum_{k != pad} log p(k)

    which is the cross-entropy -sum_k q(k) log p(k) against the smoothed distribution q
    described in the module docstring. Positions where `target == pad_id` contribute 0.
    The log-softmax is computed in float32 whatever the dtype of `logits` (autocast).

    Args:
        logits: Unnormalised scores of the model.
        target: Reference token ids; `pad_id` marks padding.
        epsilon: Smoothing mass eps in [0, 1); 0 gives the plain cross-entropy.
        pad_id: Padding id: ignored as a target and given no smoothing mass.

    Returns:
        `LossOutput(loss, nll_loss, n_tokens)`, all sums over the real tokens.

    Shape:
        logits: (B, T, V); target: (B, T); loss, nll_loss, n_tokens: () scalars.

    Raises:
        ValueError: if `epsilon` is outside [0, 1) or the shapes do not match.
    """
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"label smoothing epsilon ({epsilon}) must be in [0, 1)")
    if logits.shape[:-1] != target.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} and target {tuple(target.shape)} do not match"
        )
    vocab = logits.size(-1)
    lprobs = F.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    real = target.ne(pad_id)  # (B, T), True at real tokens
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, T, 1) -> (B, T)
    # Minus the sum of log-probabilities over every class except padding.
    smooth = -(lprobs.sum(dim=-1) - lprobs[..., pad_id])  # (B, T)
    per_token = (1.0 - epsilon) * nll + (epsilon / (vocab - 1)) * smooth  # (B, T)
    zero = per_token.new_zeros(())
    loss = torch.where(real, per_token, zero).sum()
    nll_loss = torch.where(real, nll, zero).sum().detach()
    return LossOutput(loss, nll_loss, real.sum())
