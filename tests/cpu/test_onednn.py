"""transformer/cpu/onednn.py: oneDNN layers against torch.nn.Linear in float64 (the reference)."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from torch import nn

from transformer.cpu import onednn
from transformer.cpu.onednn import (
    MIN_PACKING_ROWS,
    OneDNNLinear,
    onednn_available,
    onednn_linear_layers,
    prepacked_weights,
    restore_linear_layers,
    swap_linear_layers,
    use_onednn,
)

needs_onednn = pytest.mark.skipif(not onednn_available(), reason="no oneDNN in this build")


def reference_pair(in_features, out_features, bias=True):
    """A swapped oneDNN layer and a float64 torch.nn.Linear holding the same weights."""
    torch.manual_seed(0)
    layer = nn.Linear(in_features, out_features, bias=bias)
    ref = nn.Linear(in_features, out_features, bias=bias).double()
    ref.load_state_dict({k: v.double() for k, v in layer.state_dict().items()})
    swap_linear_layers(nn.Sequential(layer))
    return layer, ref


@needs_onednn
@pytest.mark.parametrize("shape", [(7, 48), (3, 5, 48), (1, 1, 48), (2, 3, 4, 48)])
@pytest.mark.parametrize("bias", [True, False])
def test_onednn_forward_and_gradients_equal_float64_linear(shape, bias):
    ours, ref = reference_pair(48, 80, bias=bias)
    x = torch.randn(*shape, requires_grad=True)
    x_ref = x.detach().double().requires_grad_()
    assert ours.uses_onednn(x)
    y, y_ref = ours(x), ref(x_ref)
    assert y.dtype == torch.float32 and y.shape == (*shape[:-1], 80)
    torch.testing.assert_close(y.double(), y_ref, atol=1e-5, rtol=1e-5)
    grad = torch.randn(y.shape)
    y.backward(grad)
    y_ref.backward(grad.double())
    torch.testing.assert_close(x.grad.double(), x_ref.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.weight.grad.double(), ref.weight.grad, atol=1e-5, rtol=1e-5)
    if bias:
        torch.testing.assert_close(ours.bias.grad.double(), ref.bias.grad, atol=1e-5, rtol=1e-5)


@needs_onednn
def test_onednn_takes_non_contiguous_input_and_a_scalar_loss_gradient():
    ours, ref = reference_pair(16, 8)
    x = torch.randn(16, 6).t().requires_grad_()  # (6, 16) with transposed strides
    x_ref = x.detach().double().requires_grad_()
    ours(x).sum().backward()  # the gradient arrives as an expanded (stride 0) tensor
    ref(x_ref).sum().backward()
    torch.testing.assert_close(x.grad.double(), x_ref.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.weight.grad.double(), ref.weight.grad, atol=1e-5, rtol=1e-5)


@needs_onednn
def test_frozen_weight_and_input_without_gradient():
    ours, _ = reference_pair(8, 4)
    ours.weight.requires_grad_(False)
    x = torch.randn(3, 8, requires_grad=True)
    ours(x).sum().backward()
    assert ours.weight.grad is None and x.grad is not None and ours.bias.grad is not None
    ours.weight.requires_grad_(True)
    ours(torch.randn(3, 8)).sum().backward()  # no input gradient wanted
    assert ours.weight.grad is not None


def test_empty_input_falls_back_and_keeps_the_shape():
    ours, _ = reference_pair(8, 4)
    x = torch.randn(2, 0, 8, requires_grad=True)
    assert not ours.uses_onednn(x)
    y = ours(x)
    y.sum().backward()
    assert y.shape == (2, 0, 4) and x.grad.shape == x.shape


def test_autocast_and_float64_use_torch():
    ours, ref = reference_pair(8, 4)
    x = torch.randn(3, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not ours.uses_onednn(x)
        y = ours(x)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.double(), ref(x.double()), atol=0.1, rtol=0.05)
    assert not ours.uses_onednn(x.double())


@needs_onednn
def test_second_derivatives_equal_torch_linear():
    """A recorded backward pass (Hessians, double backward) must stay exact, never zero."""
    ours, ref = reference_pair(5, 3)
    x = torch.randn(5)
    hessian = torch.autograd.functional.hessian(lambda v: ours(v).pow(3).sum(), x)
    expected = torch.autograd.functional.hessian(lambda v: ref(v).pow(3).sum(), x.double())
    torch.testing.assert_close(hessian.double(), expected, atol=1e-5, rtol=1e-5)
    x = torch.randn(4, 5, requires_grad=True)
    (grad,) = torch.autograd.grad(ours(x).pow(3).sum(), x, create_graph=True)
    grad.sum().backward()
    x_ref = x.detach().double().requires_grad_()
    (grad_ref,) = torch.autograd.grad(ref(x_ref).pow(3).sum(), x_ref, create_graph=True)
    grad_ref.sum().backward()
    torch.testing.assert_close(x.grad.double(), x_ref.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.weight.grad.double(), ref.weight.grad, atol=1e-5, rtol=1e-5)


def test_swap_keeps_parameters_names_ties_and_is_undone(make_model):
    model = make_model(50)
    params = dict(model.named_parameters())
    keys = list(model.state_dict())
    swapped = swap_linear_layers(model)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert (
        len(swapped) == len(linears) == 2 * (4 + 2) + 2 * (8 + 2) + 1
    )  # layers x (attn + ffn), W_out
    assert all(type(m) is OneDNNLinear for m in linears)
    assert dict(model.named_parameters()) == params  # the same Parameter objects
    assert list(model.state_dict()) == keys
    assert model.output_projection.weight is model.src_embed.weight  # still tied
    assert swap_linear_layers(model) == []  # idempotent
    restore_linear_layers(model)
    assert all(type(m) is nn.Linear for m in model.modules() if isinstance(m, nn.Linear))
    assert dict(model.named_parameters()) == params


@needs_onednn
def test_swapped_model_agrees_with_the_plain_model_forward_and_backward(make_model):
    src = torch.randint(4, 50, (3, 7))
    tgt = torch.randint(4, 50, (3, 5))
    results = {}
    for swap in (True, False):
        model = make_model(50)
        if swap:
            swap_linear_layers(model)
        logits = model(src, tgt)
        logits.logsumexp(-1).sum().backward()
        results[swap] = (logits.detach(), {n: p.grad for n, p in model.named_parameters()})
    torch.testing.assert_close(results[True][0], results[False][0], atol=1e-5, rtol=1e-5)
    for name, grad in results[False][1].items():
        torch.testing.assert_close(results[True][1][name], grad, atol=1e-4, rtol=1e-4)


def test_context_restores_plain_layers_also_on_an_exception(make_model):
    model = make_model(50)
    with pytest.raises(KeyboardInterrupt), onednn_linear_layers(model):
        assert type(model.output_projection) is OneDNNLinear
        raise KeyboardInterrupt
    assert type(model.output_projection) is nn.Linear
    with onednn_linear_layers(model, enabled=False):
        assert type(model.output_projection) is nn.Linear


@pytest.mark.parametrize("enabled", [True, False])
def test_context_gives_the_asked_kernel_whatever_the_model_had_and_restores_it(make_model, enabled):
    model = make_model(50)
    layers = [m for m in model.modules() if isinstance(m, nn.Linear)]
    swap_linear_layers(nn.Sequential(*layers[::2]))  # a model with both kinds of layer
    before = [type(m) for m in layers]
    assert set(before) == {nn.Linear, OneDNNLinear}
    wanted = OneDNNLinear if enabled else nn.Linear
    with pytest.raises(KeyboardInterrupt), onednn_linear_layers(model, enabled=enabled):
        assert all(type(m) is wanted for m in layers)
        raise KeyboardInterrupt
    assert [type(m) for m in layers] == before
    with onednn_linear_layers(model, enabled=enabled):
        pass
    assert [type(m) for m in layers] == before


def test_policy(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert not use_onednn("torch", cpu)
    monkeypatch.setattr(onednn, "x86_64", lambda: False)
    assert not use_onednn("auto", cpu)
    monkeypatch.setattr(onednn, "x86_64", lambda: True)
    assert use_onednn("auto", cpu) == onednn_available()
    assert not use_onednn("auto", cpu, precision="bf16")
    assert not use_onednn("auto", cpu, compile=True)
    assert not use_onednn("auto", cuda)
    for settings in ({"device": cuda}, {"device": cpu, "precision": "fp16"}):
        with pytest.raises(ValueError, match="linear kernel 'onednn' computes float32"):
            use_onednn("onednn", **settings)


@needs_onednn
def test_prepacked_weights_give_the_same_outputs_and_are_dropped_on_exit():
    ours, ref = reference_pair(48, 80)
    model = torch.nn.Sequential(ours)
    x = torch.randn(6, 48)
    with torch.no_grad(), prepacked_weights(model):
        assert ours._packed is not None
        with prepacked_weights(model):  # nested: reuses the outer packing
            inner = ours._packed
        assert ours._packed is inner
        y = ours(x)
        copy.deepcopy(model)  # copies never carry the opaque packed weight
        assert pickle.loads(pickle.dumps(ours))._packed is None
        ours.weight.mul_(0.5)  # changed inside the block: the live weight is used
        y_half = ours(x)
    assert ours._packed is None
    expected = ref(x.double()) * 0.5 + ref.bias * 0.5  # W x / 2 + b
    torch.testing.assert_close(y_half.double(), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(y.double(), ref(x.double()), atol=1e-5, rtol=1e-5)
    with prepacked_weights(model):  # gradients recorded: the packed copy is not used
        x.requires_grad_()
        ours(x).sum().backward()
    assert x.grad is not None and ours.weight.grad is not None


def test_prepacked_weights_leave_plain_layers_alone():
    plain = nn.Linear(4, 3)
    with prepacked_weights(nn.Sequential(plain)):
        assert not hasattr(plain, "_packed")


@needs_onednn
def test_packing_is_undone_when_it_fails_midway(monkeypatch):
    first, second = nn.Linear(8, 4), nn.Linear(4, 2)
    model = torch.nn.Sequential(first, second)
    swap_linear_layers(model)

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(second, "_pack", interrupted)
    with pytest.raises(KeyboardInterrupt), prepacked_weights(model):
        pass
    assert first._packed is None and second._packed is None


def test_small_searches_are_not_packed():
    layer, _ = reference_pair(8, 4)
    with prepacked_weights(torch.nn.Sequential(layer), rows=MIN_PACKING_ROWS - 1):
        assert layer._packed is None
