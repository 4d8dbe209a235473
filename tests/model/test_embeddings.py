"""Tests for transformer/model/embeddings.py (section 3.4)."""

import math

import torch

from transformer.model.embeddings import TokenEmbedding


def test_scaled_by_sqrt_d_model():
    emb = TokenEmbedding(10, 64, pad_id=0)
    tokens = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(emb(tokens), emb.weight[tokens] * math.sqrt(64))


def test_padding_row_is_zero_and_gets_no_gradient():
    emb = TokenEmbedding(10, 8, pad_id=0)
    assert torch.all(emb.weight[0] == 0)
    emb(torch.tensor([[0, 0, 5]])).sum().backward()
    assert torch.all(emb.weight.grad[0] == 0)
    assert torch.any(emb.weight.grad[5] != 0)
