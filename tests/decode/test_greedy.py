"""Tests for transformer/decoding.py: length penalty, maximum length and greedy search.

Greedy outputs are checked against a teacher-forced forward of the full model (the argmax at
every position, and the summed log-probability), against decoding without the cache, and
against decoding each sentence alone.
"""

from __future__ import annotations

import math

import pytest
import torch

from transformer import ModelConfig, Transformer
from transformer.decode.greedy import greedy_search
from transformer.decode.search import length_penalty, max_output_lengths


def tiny_model(seed: int = 0, vocab_size: int = 40, eos_boost: float = 2.5, **overrides):
    """A random d_model-32 model; `eos_boost` scales the eos embedding so some outputs end."""
    torch.manual_seed(seed)
    settings = dict(
        vocab_size=vocab_size,
        d_model=32,
        d_ff=64,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.0,
    )
    settings.update(overrides)
    model = Transformer(ModelConfig(**settings)).eval()
    with torch.no_grad():
        model.tgt_embed.weight[model.config.eos_id] *= eos_boost
    return model


def random_batch(seed: int, vocab_size: int, lengths: list[int]) -> torch.Tensor:
    """Right-padded source ids (no special tokens) with the given lengths."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for row, length in enumerate(lengths):
        src[row, :length] = torch.randint(4, vocab_size, (length,), generator=generator)
    return src


def teacher_forced_log_prob(model, src_row: torch.Tensor, tokens: list[int], finished: bool):
    """log P(tokens [+ eos] | src) from one full forward pass (no cache, no padding)."""
    config = model.config
    src = src_row[src_row.ne(config.pad_id)].unsqueeze(0)  # (S,) -> (1, S)
    target = tokens + ([config.eos_id] if finished else [])
    tgt_in = torch.tensor([[config.bos_id] + target[:-1]])
    with torch.no_grad():
        log_probs = torch.log_softmax(model(src, tgt_in).float(), dim=-1)[0]  # (T, V)
    return log_probs[torch.arange(len(target)), torch.tensor(target)].sum().item(), log_probs


def test_length_penalty_closed_forms():
    assert length_penalty(7, 0.6) == pytest.approx(((5 + 7) / 6) ** 0.6)
    assert length_penalty(1, 0.6) == pytest.approx(1.0)  # ((5 + 1) / 6) ** alpha
    assert length_penalty(7, 0.6, "power") == pytest.approx(7**0.6)
    assert length_penalty(9, 0.0) == 1.0


def test_max_output_lengths_formula_and_bounds():
    lengths = torch.tensor([1, 10, 2000])
    assert max_output_lengths(lengths, 1.0, 50, 1024) == [51, 60, 1024]
    assert max_output_lengths(lengths, 1.5, 0, 1024) == [1, 15, 1024]
    assert max_output_lengths(torch.tensor([3]), 0.0, 0, 1024) == [1]  # at least one token


def test_greedy_matches_teacher_forced_argmax_and_log_prob():
    model = tiny_model()
    src = random_batch(0, 40, [5, 9, 3, 7, 4, 6, 8, 2])
    hypotheses = greedy_search(model, src, max_len_a=1.0, max_len_b=6)
    config = model.config
    assert any(h.finished for h in hypotheses) and not all(h.finished for h in hypotheses)
    for row, h in enumerate(hypotheses):
        log_prob, log_probs = teacher_forced_log_prob(model, src[row], h.tokens, h.finished)
        target = h.tokens + ([config.eos_id] if h.finished else [])
        allowed = log_probs.clone()
        allowed[:, [config.pad_id, config.bos_id]] = -math.inf
        assert allowed.argmax(dim=-1).tolist() == target
        assert h.length == len(target)
        assert h.log_prob == pytest.approx(log_prob, abs=1e-5)
        assert h.score == pytest.approx(log_prob / ((5 + h.length) / 6) ** 0.6, abs=1e-5)
        if not h.finished:
            assert h.length == int(src[row].ne(0).sum()) + 6


def test_greedy_cache_equals_recomputing_the_prefix():
    model = tiny_model()
    src = random_batch(2, 40, [5, 9, 3, 7, 4, 6, 8, 2])
    cached = greedy_search(model, src, max_len_b=8)
    recomputed = greedy_search(model, src, max_len_b=8, use_cache=False)
    for a, b in zip(cached, recomputed, strict=True):
        assert a.tokens == b.tokens and a.finished == b.finished
        assert a.score == pytest.approx(b.score, abs=1e-5)


def test_greedy_sentence_alone_equals_in_batch():
    model = tiny_model()
    lengths = [5, 9, 3, 7, 4, 6, 8, 2]
    src = random_batch(4, 40, lengths)
    batched = greedy_search(model, src, max_len_b=7)
    for row, length in enumerate(lengths):
        alone = greedy_search(model, src[row : row + 1, :length], max_len_b=7)[0]
        assert alone.tokens == batched[row].tokens
        assert alone.score == pytest.approx(batched[row].score, abs=1e-5)


def test_greedy_respects_max_positions_and_never_emits_pad_or_bos():
    model = tiny_model(eos_boost=0.0, max_positions=5)  # eos embedding zeroed
    src = random_batch(4, 40, [3, 6])
    for h in greedy_search(model, src, max_len_b=50):
        assert h.length <= 5
        assert not set(h.tokens) & {0, 2}
