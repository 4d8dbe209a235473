"""Tests for transformer/evaluate/attention_maps.py: the collected weights are probability rows,
respect every mask, and are the weights the model actually used.

References: closed-form facts (softmax rows sum to 1, masked keys get exactly 0) and the layer's
own output, recomputed by hand from the returned weights, `v_proj` and `out_proj` (equation 1
and section 3.2.2 of the paper), compared with the output of an unhooked forward pass.
"""

from __future__ import annotations

import json

import pytest
import torch

from transformer.data.tokenizer import Tokenizer
from transformer.decode.config import DecodeConfig
from transformer.decode.greedy import greedy_search
from transformer.decode.translator import Translator
from transformer.evaluate.attention_maps import (
    KINDS,
    attention_modules,
    attention_weights,
    capture_weights,
    collect_attention,
)

SHORT, LONG = "A man.", "Two dogs play in the snow at the train station."
SHORT_DE, LONG_DE = "Ein Mann.", "Zwei Hunde spielen im Schnee am Bahnhof."


def padded_batch(tok: Tokenizer) -> tuple[torch.Tensor, torch.Tensor, list[int], list[int]]:
    """The short pair beside the long one: src (2, S), tgt_in (2, T), source and target lengths."""
    sources = [tok.encode(SHORT), tok.encode(LONG)]
    targets = [
        [tok.bos_id, *tok.encode_target(SHORT_DE)],
        [tok.bos_id, *tok.encode_target(LONG_DE)],
    ]
    src = torch.full((2, max(map(len, sources))), tok.pad_id)
    tgt_in = torch.full((2, max(map(len, targets))), tok.pad_id)
    for row, (s, t) in enumerate(zip(sources, targets, strict=True)):
        src[row, : len(s)] = torch.tensor(s)
        tgt_in[row, : len(t)] = torch.tensor(t)
    assert len(sources[0]) < src.shape[1] and len(targets[0]) < tgt_in.shape[1]
    return src, tgt_in, [len(s) for s in sources], [len(t) for t in targets]


@pytest.mark.parametrize("kind", KINDS)
def test_shapes_labels_and_rows_sum_to_one(tiny_model, tiny_tokenizer, kind):
    maps = attention_weights(
        tiny_model, tiny_tokenizer, "A man is riding a horse.", "Ein Mann reitet.", kind
    )
    n_src, n_tgt = (
        len(tiny_tokenizer.encode("A man is riding a horse.")),
        len(tiny_tokenizer.encode_target("Ein Mann reitet.")),
    )
    expected = {
        "self": (n_src, n_src),
        "cross": (n_tgt + 1, n_src),
        "decoder-self": (n_tgt + 1,) * 2,
    }
    config = tiny_model.config
    n_layers = config.n_encoder_layers if kind == "self" else config.n_decoder_layers
    assert maps.weights.shape == (n_layers, config.n_heads, *expected[kind])
    assert (len(maps.query_labels), len(maps.key_labels)) == expected[kind]
    assert maps.weights.dtype == torch.float32 and (maps.weights >= 0).all()
    sums = maps.weights.sum(dim=-1)
    torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0)
    if kind != "self":
        assert maps.query_labels == tiny_tokenizer.target_pieces(
            tiny_tokenizer.encode_target("Ein Mann reitet.") + [3]
        )
        assert maps.query_labels[-1] == "</s>"
    if kind == "decoder-self":
        assert maps.key_labels[0] == "<s>" and maps.key_labels[1:] == maps.query_labels[:-1]


@pytest.mark.parametrize("kind", KINDS)
def test_padding_keys_get_exactly_zero_and_batching_changes_nothing(
    tiny_model, tiny_tokenizer, kind
):
    src, tgt_in, src_lens, tgt_lens = padded_batch(tiny_tokenizer)
    tgt_padding = tgt_in.eq(tiny_tokenizer.pad_id)
    batched = collect_attention(tiny_model, src, tgt_in, kind, tgt_key_padding_mask=tgt_padding)
    key_len = tgt_lens[0] if kind == "decoder-self" else src_lens[0]
    query_len = src_lens[0] if kind == "self" else tgt_lens[0]
    short = batched[0]  # (L, H, T, S) of the short pair, padded
    assert short.shape[-1] > key_len
    assert torch.equal(short[..., key_len:], torch.zeros_like(short[..., key_len:]))
    sums = batched.sum(dim=-1)
    torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0)
    alone = collect_attention(tiny_model, src[:1, : src_lens[0]], tgt_in[:1, : tgt_lens[0]], kind)[
        0
    ]
    torch.testing.assert_close(short[..., :query_len, :key_len], alone, atol=1e-5, rtol=0)


def test_decoder_self_attention_is_exactly_zero_above_the_diagonal(tiny_model, tiny_tokenizer):
    src, tgt_in, _, _ = padded_batch(tiny_tokenizer)
    weights = collect_attention(tiny_model, src, tgt_in, "decoder-self")  # (B, L, H, T, T)
    T = tgt_in.shape[1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    assert torch.equal(weights[..., future], torch.zeros_like(weights[..., future]))
    assert (weights[..., ~future] > 0).all()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("layer", [0, 1])
def test_weights_reproduce_the_layer_output(tiny_model, tiny_tokenizer, kind, layer):
    """out_proj(concat_h(weights_h @ V W_h^V)) equals what the layer computed without our hooks."""
    src, tgt_in, _, _ = padded_batch(tiny_tokenizer)
    module = attention_modules(tiny_model, kind)[layer]
    calls = []
    handle = module.register_forward_hook(
        lambda mod, args, kwargs, output: calls.append((args, kwargs, output)), with_kwargs=True
    )
    try:
        with torch.no_grad():
            logits = tiny_model(src, tgt_in)  # the plain forward pass: fused kernel, no weights
    finally:
        handle.remove()
    ((args, kwargs, (actual, weights_returned)),) = calls
    assert weights_returned is None and not kwargs["need_weights"]

    weights = collect_attention(tiny_model, src, tgt_in, kind)[:, layer]  # (B, H, T, S)
    value = args[2] if len(args) > 2 else kwargs["value"]
    B, S, D = value.shape
    H = weights.shape[1]
    v = module.v_proj(value).view(B, S, H, D // H).transpose(1, 2)  # (B, S, D) -> (B, H, S, Dk)
    heads = weights @ v  # (B, H, T, S) @ (B, H, S, Dk) -> (B, H, T, Dk)
    T = heads.shape[2]
    expected = module.out_proj(heads.transpose(1, 2).reshape(B, T, D))  # (B, H, T, Dk) -> (B, T, D)
    torch.testing.assert_close(expected, actual, atol=1e-5, rtol=1e-5)

    with torch.no_grad(), capture_weights(attention_modules(tiny_model, kind)) as captured:
        hooked_logits = tiny_model(src, tgt_in)
    assert len(captured) == 2
    torch.testing.assert_close(hooked_logits, logits, atol=1e-5, rtol=1e-5)


def test_without_target_the_models_own_translation_is_force_decoded(tiny_model, tiny_tokenizer):
    src = "The child runs to the train station."
    expected = greedy_search(tiny_model, torch.tensor([tiny_tokenizer.encode(src)]))[0].tokens
    maps = attention_weights(
        tiny_model, tiny_tokenizer, src, kind="cross", decode=DecodeConfig(beam_size=1)
    )
    assert maps.target == tiny_tokenizer.decode(expected)
    assert maps.query_labels == tiny_tokenizer.target_pieces(expected + [tiny_tokenizer.eos_id])
    assert maps.weights.shape[2] == len(expected) + 1


def test_translation_is_what_the_translator_gives(tiny_model, tiny_tokenizer):
    translator = Translator(tiny_model, tiny_tokenizer)
    for src in (SHORT, "A woman reads a book."):
        expected = translator.translate([src], beam_size=2)[0]
        maps = attention_weights(tiny_model, tiny_tokenizer, src, decode=DecodeConfig(beam_size=2))
        assert maps.target == expected


def test_model_mode_is_restored_and_hooks_are_removed(tiny_model, tiny_tokenizer):
    tiny_model.train()
    try:
        attention_weights(tiny_model, tiny_tokenizer, SHORT, SHORT_DE, "cross")
        assert tiny_model.training
    finally:
        tiny_model.eval()
    for module in attention_modules(tiny_model, "cross") + attention_modules(tiny_model, "self"):
        assert not module._forward_hooks and not module._forward_pre_hooks


def test_bad_inputs_name_the_value(tiny_model, tiny_tokenizer):
    with pytest.raises(ValueError, match="'encoder'"):
        attention_weights(tiny_model, tiny_tokenizer, SHORT, kind="encoder")
    with pytest.raises(ValueError, match="no tokens"):
        attention_weights(tiny_model, tiny_tokenizer, "", SHORT_DE)
    with pytest.raises(ValueError, match="tgt_in"):
        collect_attention(tiny_model, torch.tensor([tiny_tokenizer.encode(SHORT)]), None, "cross")


def test_to_dict_is_json_with_the_same_weights(tiny_model, tiny_tokenizer):
    maps = attention_weights(tiny_model, tiny_tokenizer, SHORT, SHORT_DE, "decoder-self")
    raw = json.loads(json.dumps(maps.to_dict()))
    config = tiny_model.config
    assert (raw["layers"], raw["heads"]) == (config.n_decoder_layers, config.n_heads)
    assert raw["kind"] == "decoder-self"
    assert raw["query_labels"] == maps.query_labels and raw["key_labels"] == maps.key_labels
    torch.testing.assert_close(torch.tensor(raw["weights"]), maps.weights, atol=0, rtol=0)


def test_the_checkpoints_decode_section_translates_as_the_translator_does(
    tmp_path, tiny_model, tiny_tokenizer, write_checkpoint
):
    """Issue #16, item 7: `decode=config.decode` gives the target that `Translator` gives."""
    from transformer.checkpoint import load_checkpoint
    from transformer.config import Config, config_to_dict

    section = DecodeConfig(beam_size=2, max_len_b=2)
    config = config_to_dict(Config(model=tiny_model.config, decode=section))
    path = write_checkpoint(tmp_path / "c.pt", tiny_model, tiny_tokenizer, config=config)
    model, tokenizer, loaded = load_checkpoint(path)
    translator = Translator.from_checkpoint(path)
    maps = attention_weights(model, tokenizer, SHORT, decode=loaded.decode)
    assert maps.target == translator.translate(SHORT)
    assert maps.target == translator.translate(SHORT, beam_size=2, max_len_b=2)
    assert len(maps.query_labels) <= len(tokenizer.encode(SHORT)) + 2 + 1  # b = 2; + "</s>"
