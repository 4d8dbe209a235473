"""transformer/linear.py: the oneDNN kernel against torch.nn.Linear in float64 (the reference)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from transformer import ModelConfig, Transformer
from transformer.linear import Linear, onednn_available

needs_onednn = pytest.mark.skipif(not onednn_available(), reason="no oneDNN in this build")


def reference_pair(in_features, out_features, bias=True, kernel="onednn"):
    """Our Linear and a float64 torch.nn.Linear holding the same weights."""
    torch.manual_seed(0)
    ours = Linear(in_features, out_features, bias=bias, kernel=kernel)
    ref = nn.Linear(in_features, out_features, bias=bias).double()
    ref.load_state_dict({k: v.double() for k, v in ours.state_dict().items()})
    return ours, ref


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


def test_autocast_uses_torch_and_returns_bf16():
    ours, ref = reference_pair(8, 4, kernel="auto")
    x = torch.randn(3, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not ours.uses_onednn(x)
        y = ours(x)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.double(), ref(x.double()), atol=0.1, rtol=0.05)


def test_onednn_kernel_refuses_input_it_cannot_take():
    ours, _ = reference_pair(8, 4, kernel="onednn")
    with pytest.raises(ValueError, match="float32 CPU input"):
        ours(torch.randn(3, 8, dtype=torch.float64))


def test_torch_kernel_never_uses_onednn_and_unknown_kernel_is_refused():
    ours, ref = reference_pair(8, 4, kernel="torch")
    x = torch.randn(3, 8)
    assert not ours.uses_onednn(x)
    torch.testing.assert_close(ours(x).double(), ref(x.double()), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="linear kernel .'mkl'. must be one of"):
        Linear(8, 4, kernel="mkl")


def test_state_dict_matches_torch_nn_linear():
    ours = Linear(8, 4)
    assert isinstance(ours, nn.Linear)
    assert set(ours.state_dict()) == set(nn.Linear(8, 4).state_dict()) == {"weight", "bias"}
    assert "kernel=auto" in repr(ours)


@needs_onednn
def test_model_kernels_agree_forward_and_backward():
    config = ModelConfig(
        vocab_size=50, d_model=32, d_ff=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2
    )
    src = torch.randint(4, 50, (3, 7))
    tgt = torch.randint(4, 50, (3, 5))
    grads = {}
    for kernel in ("onednn", "torch"):
        torch.manual_seed(0)
        model = Transformer(ModelConfig(**{**config.__dict__, "linear_kernel": kernel})).eval()
        logits = model(src, tgt)
        logits.logsumexp(-1).sum().backward()
        grads[kernel] = (logits.detach(), {n: p.grad for n, p in model.named_parameters()})
    torch.testing.assert_close(grads["onednn"][0], grads["torch"][0], atol=1e-5, rtol=1e-5)
    for name, grad in grads["torch"][1].items():
        torch.testing.assert_close(grads["onednn"][1][name], grad, atol=1e-4, rtol=1e-4)


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


def test_auto_keeps_torch_linear_off_x86(monkeypatch):
    from transformer import linear as linear_module

    ours, _ = reference_pair(8, 4, kernel="auto")
    x = torch.randn(3, 8)
    monkeypatch.setattr(linear_module, "x86_64", lambda: False)
    assert not ours.uses_onednn(x)
    monkeypatch.setattr(linear_module, "x86_64", lambda: True)
    assert ours.uses_onednn(x) == onednn_available()


@needs_onednn
def test_prepacked_weights_give_the_same_outputs_and_are_dropped_on_exit(monkeypatch):
    from transformer import linear as linear_module
    from transformer.linear import prepacked_weights

    monkeypatch.setattr(linear_module, "x86_64", lambda: True)
    ours, ref = reference_pair(48, 80, kernel="auto")
    model = torch.nn.Sequential(ours)
    x = torch.randn(6, 48)
    with torch.no_grad(), prepacked_weights(model):
        assert ours._packed is not None
        with prepacked_weights(model):  # nested: reuses the outer packing
            inner = ours._packed
        assert ours._packed is inner
        y = ours(x)
        copy.deepcopy(model)  # copies never carry the opaque packed weight
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


def test_prepacked_weights_leave_other_layers_and_objects_alone():
    from transformer.linear import prepacked_weights

    torch_layer = Linear(4, 3, kernel="torch")
    with prepacked_weights(torch.nn.Sequential(torch_layer)):
        assert torch_layer._packed is None
    with prepacked_weights(object()):  # not a module: nothing to pack
        pass


@needs_onednn
def test_packing_is_undone_when_it_fails_midway(monkeypatch):
    from transformer import linear as linear_module
    from transformer.linear import prepacked_weights

    monkeypatch.setattr(linear_module, "x86_64", lambda: True)
    first, second = Linear(8, 4), Linear(4, 2)
    model = torch.nn.Sequential(first, second)

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(second, "_pack", interrupted)
    with pytest.raises(KeyboardInterrupt), prepacked_weights(model):
        pass
    assert first._packed is None and second._packed is None


def test_small_searches_are_not_packed():
    from transformer.linear import MIN_PACKING_ROWS, prepacked_weights

    layer = Linear(8, 4)
    with prepacked_weights(torch.nn.Sequential(layer), rows=MIN_PACKING_ROWS - 1):
        assert layer._packed is None
