"""Tests for transformer/train/update.py: one optimizer update over several micro-batches.

The reference is the update written out by hand on a copy of the model: the gradient of the
label-smoothed loss summed over every real target token of all micro-batches, divided by their
number (section 5.4), in one backward pass, then a plain SGD step (so the expected weights
have a closed form: w - lr * g, with g scaled by clip / |g| when clipped).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from transformer.data.batching import Batch
from transformer.train import update as update_module
from transformer.train.distributed import DistributedContext
from transformer.train.loss import label_smoothed_cross_entropy
from transformer.train.optim import LRSchedule
from transformer.train.precision import grad_scaler
from transformer.train.update import UpdateStep

PAD, BOS, EOS, EPSILON, LR = 0, 2, 3, 0.1, 0.5
CPU = torch.device("cpu")


def batch_of(pairs: list[tuple[list[int], list[int]]]) -> Batch:
    """A padded batch of (source ids, target ids) pairs, as `BatchIterator` makes them."""
    S = max(len(s) for s, _ in pairs)
    T = max(len(t) for _, t in pairs) + 1
    src = torch.full((len(pairs), S), PAD)
    tgt_in, tgt_out = torch.full((len(pairs), T), PAD), torch.full((len(pairs), T), PAD)
    for row, (s, t) in enumerate(pairs):
        src[row, : len(s)] = torch.tensor(s)
        tgt_in[row, : len(t) + 1] = torch.tensor([BOS, *t])
        tgt_out[row, : len(t) + 1] = torch.tensor([*t, EOS])
    n_tgt = int(tgt_out.ne(PAD).sum())
    return Batch(src, tgt_in, tgt_out, int(src.ne(PAD).sum()), n_tgt, np.arange(len(pairs)))


MICRO_BATCHES = [
    batch_of([([5, 6, 7, 8], [9, 10]), ([11, 12], [13, 14, 15, 16, 17])]),
    batch_of([([18, 19, 20], [21])]),
    batch_of([([22], [23, 24, 25]), ([4, 5, 6, 7, 8, 9], [10, 11, 12, 13])]),
]


@pytest.fixture
def model(make_model):
    return make_model(30, dropout=0.0).double()


def update_step(model, clip_norm=None, precision="fp32"):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    schedule = LRSchedule(optimizer, lambda step: LR)
    step = UpdateStep(
        model=model,
        optimizer=optimizer,
        schedule=schedule,
        scaler=grad_scaler(precision, CPU),
        context=DistributedContext(),
        precision=precision,
        label_smoothing=EPSILON,
        pad_id=PAD,
        clip_norm=clip_norm,
    )
    return step, schedule


def reference_gradient(model, clip_norm=None) -> tuple[dict[str, torch.Tensor], float, float, int]:
    """Gradient of (sum of every micro-batch's summed loss) / (all real target tokens), on a
    copy of `model`; clipped by `torch.nn.utils.clip_grad_norm_` when `clip_norm` is given."""
    reference = copy.deepcopy(model).train()
    outs = [
        label_smoothed_cross_entropy(reference(b.src, b.tgt_in), b.tgt_out, EPSILON, PAD)
        for b in MICRO_BATCHES
    ]
    tokens = sum(b.n_tgt_tokens for b in MICRO_BATCHES)
    (sum(out.loss for out in outs) / tokens).backward()
    if clip_norm is not None:
        torch.nn.utils.clip_grad_norm_(reference.parameters(), clip_norm)
    grads = {name: p.grad for name, p in reference.named_parameters()}
    loss = sum(out.loss.item() for out in outs)
    return grads, loss, sum(out.nll_loss.item() for out in outs), tokens


def test_one_update_over_micro_batches_is_the_step_of_the_whole_batchs_per_token_loss(model):
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    grads, loss_sum, nll_sum, tokens = reference_gradient(model)
    step, schedule = update_step(model)
    result = step(MICRO_BATCHES, [False, False])
    assert result.applied and result.finite and result.grad_norm is None
    assert result.tokens == tokens == 2 + 1 + 5 + 1 + 1 + 1 + 3 + 1 + 4 + 1
    assert result.loss_sum == pytest.approx(loss_sum, rel=1e-12)
    assert result.nll_sum == pytest.approx(nll_sum, rel=1e-12)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), before[name] - LR * grads[name], rtol=0, atol=1e-12)
        assert p.grad is None  # cleared for the next update
    assert schedule.num_updates == 1


def test_clipping_scales_the_gradient_to_clip_norm_and_reports_the_norm_before(model):
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    grads, _, _, _ = reference_gradient(model)
    norm = torch.cat([g.flatten() for g in grads.values()]).norm().item()
    clip = norm / 4
    clipped, _, _, _ = reference_gradient(model, clip_norm=clip)
    step, _ = update_step(model, clip_norm=clip)
    result = step(MICRO_BATCHES, [False, False])
    assert result.grad_norm == pytest.approx(norm, rel=1e-9)
    for name, p in model.named_parameters():
        expected = before[name] - LR * clipped[name]
        torch.testing.assert_close(p.detach(), expected, rtol=0, atol=1e-12)
    assert torch.cat([g.flatten() for g in clipped.values()]).norm().item() == pytest.approx(
        clip, rel=1e-4
    )


def test_a_non_finite_loss_changes_nothing_and_is_reported(model, monkeypatch):
    real = update_module.label_smoothed_cross_entropy

    def nan_loss(*args, **kwargs):
        out = real(*args, **kwargs)
        return out._replace(loss=out.loss * float("nan"))

    monkeypatch.setattr(update_module, "label_smoothed_cross_entropy", nan_loss)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    step, schedule = update_step(model)
    result = step(MICRO_BATCHES, [False, True])
    assert not result.finite and not result.applied
    assert result.flags == [False, True]
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), before[name]) and p.grad is None
    assert schedule.num_updates == 0  # the rate of the next update is still update 1's


def test_flags_are_returned_as_booleans(model):
    step, _ = update_step(model)
    assert step(MICRO_BATCHES[:1], [True, False]).flags == [True, False]
    assert step(MICRO_BATCHES[:1], [False, False]).flags == [False, False]


def test_every_reduced_tensor_is_on_the_training_device(model, monkeypatch):
    """NCCL reduces GPU tensors only; gloo, which runs the tests, takes any CPU tensor, so a
    real CPU job cannot tell. The simulation: on a GPU, a tensor made without `device=` lands
    on the default device (the CPU), not on the training device. Here the training device is
    the CPU and the default device is made `meta`, so such a tensor again lands off the training
    device; a stand-in for `all_reduce_sum` refuses it with NCCL's error. (The model and the
    batches are already on the CPU, so nothing else is affected.)"""
    reduced = []

    def nccl_like_all_reduce_sum(tensor, context):
        if tensor.device != context.device:
            raise RuntimeError(f"No backend type associated with device type {tensor.device}")
        reduced.append(tensor.clone())
        return tensor

    reference, _ = update_step(copy.deepcopy(model))
    expected = reference(MICRO_BATCHES, [False, True])
    monkeypatch.setattr(update_module, "all_reduce_sum", nccl_like_all_reduce_sum)
    step, _ = update_step(model)
    with torch.device("meta"):
        result = step(MICRO_BATCHES, [False, True])
    assert len(reduced) == 2  # the token count, then the loss sums with the flags
    assert reduced[0].tolist() == [expected.tokens]
    assert reduced[1].tolist() == [expected.loss_sum, expected.nll_sum, 0.0, 1.0]
    assert result == expected


def test_ddp_does_not_broadcast_the_constant_positional_table(model, tmp_path):
    """A one-process gloo group is enough to build the DistributedDataParallel wrapper."""
    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        step = UpdateStep(
            model=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.0),
            schedule=None,
            scaler=grad_scaler("fp32", CPU),
            context=DistributedContext(world_size=2),  # enabled: wrap the model
            precision="fp32",
            label_smoothing=EPSILON,
            pad_id=PAD,
            clip_norm=None,
        )
        assert step.ddp is not None and step.ddp.broadcast_buffers is False
        assert not step.ddp.will_sync_module_buffers()
        # The one buffer, which it would broadcast: constant, and not saved in checkpoints.
        buffers = [name for name, _ in model.named_buffers()]
        assert buffers == ["positional_encoding.table"]
        assert not any(name in model.state_dict() for name in buffers)
        del step
    finally:
        torch.distributed.destroy_process_group()


def test_compiling_does_not_recompile_for_every_batch_shape(make_model, monkeypatch):
    """One compilation, with dynamic sizes, serves batches of every shape (torch.compile's
    default specialises on the first shape and recompiles at the first change, and at each
    later change of a size that was still static). A counting backend (which runs the captured
    graph as it is) stands in for inductor."""
    compiled, real_compile = [], torch.compile

    def counting_backend(graph_module, example_inputs):
        compiled.append(graph_module)
        return graph_module.forward

    def compile_counting(model, **kwargs):
        return real_compile(model, backend=counting_backend, **kwargs)

    monkeypatch.setattr(torch, "compile", compile_counting)
    torch._dynamo.reset()
    model = make_model(60, dropout=0.0, n_encoder_layers=1, n_decoder_layers=1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step = UpdateStep(
        model=model,
        optimizer=optimizer,
        schedule=LRSchedule(optimizer, lambda step: 0.01),
        scaler=grad_scaler("fp32", CPU),
        context=DistributedContext(),
        precision="fp32",
        label_smoothing=EPSILON,
        pad_id=PAD,
        clip_norm=None,
        compile=True,
    )
    rng = np.random.default_rng(0)
    shapes = set()
    for _ in range(16):
        B, S, T = (int(n) for n in rng.integers(2, 12, 3))
        pairs = [([5] * S, [6] * (T - 1)) for _ in range(B)]
        batch = batch_of(pairs)
        shapes.add((B, S, T))
        assert step([batch], [False, False]).applied
    torch._dynamo.reset()
    assert len(shapes) == 16 and len(compiled) == 1


def _update_with_a_clock(rank: int, world: int, port: int, results) -> None:
    """One process of a gloo job: one update whose clock reads 10 s on rank 0 and 50 s on
    rank 1; report the cooldown factor the schedule set."""
    import os

    from transformer.model.config import ModelConfig
    from transformer.model.transformer import Transformer
    from transformer.train.distributed import init_distributed, shutdown
    from transformer.train.optim import Cooldown

    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world),
        RANK=str(rank), LOCAL_RANK=str(rank),
    )  # fmt: skip
    torch.set_num_threads(1)
    context = init_distributed("cpu")
    torch.manual_seed(0)
    model = Transformer(
        ModelConfig(vocab_size=30, d_model=8, d_ff=16, n_heads=2, n_encoder_layers=1,
                    n_decoder_layers=1, dropout=0.0)
    )  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    schedule = LRSchedule(optimizer, lambda step: 1.0, Cooldown(1.0, 10**6, 100.0))
    step = UpdateStep(
        model=model, optimizer=optimizer, schedule=schedule, scaler=grad_scaler("fp32", CPU),
        context=context, precision="fp32", label_smoothing=EPSILON, pad_id=PAD, clip_norm=None,
    )  # fmt: skip
    step([MICRO_BATCHES[rank]], [False], lambda: 10.0 + 40.0 * rank)
    results.put((rank, schedule.factor, optimizer.param_groups[0]["lr"]))
    shutdown(context)


def test_every_process_sets_the_rate_of_the_mean_clock():
    """Processes read their clocks at slightly different times; a time-budget cooldown must
    still set one rate on all of them (else the replicas drift apart): the mean, 30 s of 100."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    queue = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(_update_with_a_clock, args=(2, port, queue), nprocs=2, start_method="spawn")
    results = sorted(queue.get() for _ in range(2))
    assert [factor for _, factor, _ in results] == [pytest.approx(0.7)] * 2
    assert results[0][1:] == results[1][1:]  # bit for bit the same


def test_one_process_gives_its_clock_to_the_schedule(model):
    step, schedule = update_step(model)
    seen = []
    schedule.step = lambda elapsed_seconds=None: seen.append(elapsed_seconds)
    assert step(MICRO_BATCHES, [False], lambda: 12.5).applied
    assert step(MICRO_BATCHES, [False]).applied  # no clock: the schedule counts steps only
    assert seen == [12.5, None]
