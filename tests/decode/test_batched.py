"""Tests for transformer/decode/batched.py: length-sorted batches in inference mode."""

from __future__ import annotations

import torch

from transformer.decode.batched import batches, eval_mode, inference


def test_every_index_once_longest_first_within_the_budget(make_model):
    model = make_model(40)
    lengths = [3, 9, 1, 4, 4, 7, 2]
    seen = list(batches(lengths, 9, [model], onednn=False))
    assert sorted(i for group in seen for i in group) == list(range(len(lengths)))
    for group in seen:
        assert len(group) * max(lengths[i] for i in group) <= 9 or len(group) == 1
    assert [lengths[group[0]] for group in seen] == sorted(
        (lengths[g[0]] for g in seen), reverse=True
    )
    assert list(batches([], 9, [model], onednn=False)) == []


def test_models_are_in_eval_mode_inside_and_restored_after(make_model):
    first, second = make_model(40).train(), make_model(40).eval()
    with inference([first, second], onednn=False, rows=1):
        assert not first.training and not second.training
    assert first.training and not second.training
    try:
        with eval_mode(first):
            raise KeyError
    except KeyError:
        pass
    assert first.training
    for group in batches([2, 2], 4, [first], onednn=False):
        assert not first.training and group == [0, 1]
    assert first.training
    assert torch.is_grad_enabled()
