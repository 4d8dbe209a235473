"""Tests for transformer/train/loss.py: label-smoothed cross-entropy (section 5.4) against hand
computations and torch.nn."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from transformer.train.loss import label_smoothed_cross_entropy

PAD = 0


def test_matches_hand_computation_with_mass_spread_over_non_pad_classes():
    logits = torch.tensor([[[0.5, 1.0, -2.0, 0.3, 2.0], [1.5, -0.5, 0.0, 0.7, 0.1]]])
    target = torch.tensor([[4, 2]])
    eps, vocab = 0.1, 5
    expected = 0.0
    for t in range(2):
        row = logits[0, t].tolist()
        log_z = math.log(sum(math.exp(v) for v in row))
        for k in range(vocab):
            q = (1 - eps) * (k == target[0, t].item()) + (eps / (vocab - 1)) * (k != PAD)
            expected -= q * (row[k] - log_z)
    out = label_smoothed_cross_entropy(logits, target, epsilon=eps, pad_id=PAD)
    assert out.loss.item() == pytest.approx(expected, rel=1e-6)
    assert out.n_tokens.item() == 2


def test_smoothing_mass_sums_to_one_and_skips_pad():
    # The gradient of the cross-entropy against q is softmax(logits) - q, which recovers q.
    vocab, eps = 7, 0.1
    logits = torch.zeros(1, 1, vocab, requires_grad=True)
    target = torch.tensor([[3]])
    label_smoothed_cross_entropy(logits, target, eps, PAD).loss.backward()
    q = torch.softmax(logits.detach(), -1)[0, 0] - logits.grad[0, 0]
    assert q.sum().item() == pytest.approx(1.0, abs=1e-6)
    assert q[PAD].item() == pytest.approx(0.0, abs=1e-7)
    assert q[3].item() == pytest.approx(1 - eps + eps / (vocab - 1), abs=1e-6)
    assert q[1].item() == pytest.approx(eps / (vocab - 1), abs=1e-7)


def test_without_smoothing_equals_torch_cross_entropy():
    torch.manual_seed(0)
    logits = torch.randn(3, 6, 11)
    target = torch.randint(1, 11, (3, 6))
    target[0, 4:] = PAD
    target[2, 1:] = PAD
    out = label_smoothed_cross_entropy(logits, target, epsilon=0.0, pad_id=PAD)
    reference = F.cross_entropy(
        logits.view(-1, 11), target.view(-1), ignore_index=PAD, reduction="sum"
    )
    assert out.loss.item() == pytest.approx(reference.item(), rel=1e-6)
    assert out.nll_loss.item() == pytest.approx(reference.item(), rel=1e-6)
    assert out.n_tokens.item() == int(target.ne(PAD).sum())


def test_padding_positions_contribute_nothing():
    torch.manual_seed(1)
    logits = torch.randn(2, 5, 9, requires_grad=True)
    target = torch.randint(1, 9, (2, 5))
    target[1, 3:] = PAD
    label_smoothed_cross_entropy(logits, target).loss.backward()
    assert torch.all(logits.grad[1, 3:] == 0)
    changed = logits.detach().clone()
    changed[1, 3:] = 100.0
    a = label_smoothed_cross_entropy(logits.detach(), target).loss
    b = label_smoothed_cross_entropy(changed, target).loss
    assert a.item() == b.item()


def test_low_precision_logits_give_float32_loss():
    logits = torch.randn(2, 3, 8).to(torch.bfloat16)
    out = label_smoothed_cross_entropy(logits, torch.randint(1, 8, (2, 3)))
    assert out.loss.dtype == torch.float32


def test_invalid_epsilon_and_shapes():
    with pytest.raises(ValueError, match="epsilon"):
        label_smoothed_cross_entropy(torch.zeros(1, 1, 4), torch.ones(1, 1, dtype=torch.long), 1.0)
    with pytest.raises(ValueError, match="do not match"):
        label_smoothed_cross_entropy(torch.zeros(1, 2, 4), torch.ones(1, 3, dtype=torch.long))


def _pad(rows: list[list[int]]) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


def test_micro_batches_give_the_same_gradient_as_one_batch(make_model):
    """Summed loss / real tokens of the whole update: splitting the batch (each part padded
    to its own length) leaves the gradient unchanged (section 5.4 normalisation)."""
    model = make_model(23, dropout=0.0).double()
    src = [[5, 6, 7, 8, 9, 10], [11, 12], [13, 14, 15], [4, 16, 17, 18, 19]]
    tgt = [[6, 7, 8], [9, 10, 11, 12, 13, 14, 15], [16], [17, 18, 19, 20]]

    def loss_and_tokens(rows):
        s = _pad([src[i] for i in rows])
        t_in = _pad([[2] + tgt[i] for i in rows])
        t_out = _pad([tgt[i] + [3] for i in rows])
        out = label_smoothed_cross_entropy(model(s, t_in), t_out, 0.1, PAD)
        return out.loss, out.n_tokens.item()

    def gradient(parts):
        model.zero_grad()
        total = sum(loss_and_tokens(p)[1] for p in parts)
        for part in parts:
            (loss_and_tokens(part)[0] / total).backward()
        return torch.cat([p.grad.flatten() for p in model.parameters()])

    whole = gradient([[0, 1, 2, 3]])
    split = gradient([[0, 1], [2, 3]])
    assert torch.allclose(whole, split, atol=1e-6, rtol=0)
    assert whole.abs().max() > 1e-3
