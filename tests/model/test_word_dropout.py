"""Tests for transformer/model/word_dropout.py and its place in the Transformer.

References: the definition (each token's whole embedding kept with probability 1 - p and
scaled by 1 / (1 - p), or zeroed), a binomial bound on the dropped share, and the model's
own parts composed by hand with the same random draws.
"""

import pytest
import torch

from transformer import ModelConfig
from transformer.model.word_dropout import WordDropout


def test_each_token_is_kept_whole_and_rescaled_or_zeroed():
    torch.manual_seed(0)
    embedded = torch.randn(4, 50, 8) + 3.0  # no zero units of its own
    out = WordDropout(0.25).train()(embedded)
    kept = (out != 0).all(dim=-1)  # (B, T): a whole row survives ...
    dropped = (out == 0).all(dim=-1)  # ... or a whole row is zero
    assert torch.all(kept ^ dropped)
    torch.testing.assert_close(out[kept], embedded[kept] / 0.75)
    assert 0 < int(dropped.sum()) < dropped.numel()


def test_dropped_share_is_p_within_binomial_bounds():
    torch.manual_seed(1)
    n = 200_000
    out = WordDropout(0.1).train()(torch.ones(1, n, 2))
    share = (out[0, :, 0] == 0).float().mean().item()
    sd = (0.1 * 0.9 / n) ** 0.5
    assert abs(share - 0.1) < 5 * sd


def test_identity_in_eval_mode_and_at_zero():
    embedded = torch.randn(2, 5, 4)
    assert WordDropout(0.5).eval()(embedded) is embedded
    assert WordDropout(0.0).train()(embedded) is embedded


@pytest.mark.parametrize("name", ["src_word_dropout", "tgt_word_dropout"])
@pytest.mark.parametrize("value", [-0.1, 1.0])
def test_config_rejects_out_of_range(name, value):
    with pytest.raises(ValueError, match=rf"^model\.{name} \({value}\) must be in \[0, 1\)"):
        ModelConfig(**{name: value})


@pytest.mark.parametrize("name", ["dropout", "src_word_dropout", "tgt_word_dropout"])
@pytest.mark.parametrize("value", ["0.1", None, False])
def test_config_rejects_what_is_not_a_number(name, value):
    """A stored checkpoint config with a string gave "'<=' not supported" (bad-input pass)."""
    with pytest.raises(
        ValueError, match=rf"^model\.{name} \({value!r}\) must be a number in \[0, 1\)$"
    ):
        ModelConfig(**{name: value})


def test_model_drops_source_and_target_embeddings_before_the_positions(make_model):
    model = make_model(30, src_word_dropout=0.3, tgt_word_dropout=0.2, dropout=0.0).train()
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]])
    tgt_in = torch.tensor([[2, 11, 12, 13], [2, 14, 0, 0]])
    torch.manual_seed(7)
    logits = model(src, tgt_in)

    torch.manual_seed(7)  # the same draws, in the same order: source first, then target
    src_mask = (torch.rand(2, 5, 1) < 0.7).float() / 0.7
    tgt_mask = (torch.rand(2, 4, 1) < 0.8).float() / 0.8
    padding = src == 0
    memory = model.encoder(model.positional_encoding(model.src_embed(src) * src_mask), padding)
    x = model.positional_encoding(model.tgt_embed(tgt_in) * tgt_mask)
    reference = model.output_projection(model.decoder(x, memory, None, padding))
    torch.testing.assert_close(logits, reference)
    assert src_mask.eq(0).any() and tgt_mask.eq(0).any()  # the draw did drop something

    model.eval()
    torch.testing.assert_close(model(src, tgt_in), make_model(30, dropout=0.0)(src, tgt_in))
