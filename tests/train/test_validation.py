"""Tests for transformer/train/validation.py: validation loss, BLEU, best and early stopping.

References: `torch.nn.functional.cross_entropy` for the loss without smoothing and for the NLL;
`greedy_search` on each sentence alone and `sacrebleu` called directly for BLEU; comparisons
written out by hand for which value is better.
"""

from __future__ import annotations

import math

import pytest
import sacrebleu
import torch
import torch.nn.functional as F

from transformer.config import Config
from transformer.cpu import onednn
from transformer.cpu.onednn import OneDNNLinear
from transformer.data.batching import BatchIterator
from transformer.data.corpus import ParallelText
from transformer.data.encoding import encode_corpus
from transformer.data.prepare import PreparedData
from transformer.decode.config import DecodeConfig
from transformer.decode.greedy import greedy_search
from transformer.train.config import HIGHER_IS_BETTER, TrainConfig
from transformer.train.distributed import DistributedContext
from transformer.train.metrics_log import MetricsLog
from transformer.train.state import TrainState
from transformer.train.validation import (
    Validator,
    is_improvement,
    validation_bleu,
    validation_loss,
)

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def pairs(synthetic_sentences, synthetic_tokenizer):
    """Twelve synthetic pairs: the raw text and its encoded dataset."""
    src, ref = synthetic_sentences(12, seed=30), synthetic_sentences(12, seed=31)
    data = encode_corpus(ParallelText(src, ref, "valid", "fingerprint"), synthetic_tokenizer)
    return src, ref, data


def test_loss_nll_and_perplexity_are_per_real_target_token(translation_model, pairs):
    _, _, data = pairs
    batches = list(BatchIterator(data, 40, shuffle=False).epoch(1))
    assert len(batches) > 1
    plain = validation_loss(
        translation_model, batches, 0.0, 0, CPU, torch.autocast("cpu", enabled=False)
    )
    smoothed = validation_loss(
        translation_model, batches, 0.1, 0, CPU, torch.autocast("cpu", enabled=False)
    )
    nll = smoothed_sum = 0.0
    tokens = 0
    with torch.no_grad():
        for b in batches:
            logits = translation_model(b.src, b.tgt_in).flatten(0, 1)  # (B*T, V)
            target = b.tgt_out.flatten()
            real = target.ne(0)
            nll += F.cross_entropy(logits, target, ignore_index=0, reduction="sum").item()
            # Section 5.4 by hand: 1 - eps on the target, eps spread over the V - 1 non-pad ids.
            log_p = torch.log_softmax(logits[real].double(), dim=-1)
            V = log_p.shape[-1]
            on_target = log_p.gather(1, target[real, None]).squeeze(1)
            spread = log_p[:, 1:].sum(-1) / (V - 1)
            smoothed_sum -= (0.9 * on_target + 0.1 * spread).sum().item()
            tokens += int(real.sum())
    assert plain["tokens"] == smoothed["tokens"] == tokens
    assert plain["loss"] == pytest.approx(nll / tokens, rel=1e-5)
    assert smoothed["loss"] == pytest.approx(smoothed_sum / tokens, rel=1e-5)
    for metrics in (plain, smoothed):
        assert metrics["nll_loss"] == pytest.approx(nll / tokens, rel=1e-5)
        assert metrics["ppl"] == pytest.approx(math.exp(nll / tokens), rel=1e-5)
    assert not translation_model.training


def test_bleu_is_sacrebleu_of_greedy_decoding(translation_model, synthetic_tokenizer, pairs):
    src, ref, _ = pairs
    decode = DecodeConfig(max_len_b=6)
    scores = validation_bleu(
        translation_model, synthetic_tokenizer, src, ref, "en", CPU, decode, "auto"
    )
    hyps = []
    for sentence in src:
        ids = torch.tensor([synthetic_tokenizer.encode(sentence)])
        (h,) = greedy_search(translation_model, ids, max_len_a=1.0, max_len_b=6)
        hyps.append(synthetic_tokenizer.decode(h.tokens))
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [ref]).score)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [ref]).score)


@pytest.mark.parametrize("metric", list(HIGHER_IS_BETTER))
def test_improvement_follows_each_metrics_direction(metric):
    higher = metric in ("bleu", "chrf")
    assert is_improvement(metric, 5.0, None)  # the first value is always the best so far
    assert is_improvement(metric, 6.0, 5.0) == higher
    assert is_improvement(metric, 4.0, 5.0) == (not higher)
    assert not is_improvement(metric, 5.0, 5.0)  # a tie is not an improvement


def _validator(pairs, synthetic_tokenizer, tmp_path, **train) -> Validator:
    src, ref, data = pairs
    prepared = PreparedData(synthetic_tokenizer, None, data, src, ref)
    config = Config(train=TrainConfig(max_tokens=40, **train), decode=DecodeConfig(max_len_b=6))
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    return Validator(prepared, config, DistributedContext(), "fp32", metrics, log=lambda m: None)


def test_validate_reports_the_loss_and_bleu_of_the_validation_pairs(
    translation_model, synthetic_tokenizer, pairs, tmp_path
):
    src, ref, data = pairs
    validator = _validator(pairs, synthetic_tokenizer, tmp_path, valid_bleu_sentences=5)
    translation_model.train()
    metrics = validator.validate(translation_model)
    assert translation_model.training  # put back for the next update
    translation_model.eval()
    batches = BatchIterator(data, 40, shuffle=False).epoch(1)
    loss = validation_loss(
        translation_model, batches, 0.1, 0, CPU, torch.autocast("cpu", enabled=False)
    )
    bleu = validation_bleu(
        translation_model,
        synthetic_tokenizer,
        src[:5],
        ref[:5],
        "de",
        CPU,
        DecodeConfig(max_len_b=6),
        "auto",
    )
    assert metrics == pytest.approx({**loss, **bleu})


@pytest.mark.parametrize("kernel", ["torch", "auto"])
def test_validation_decodes_with_the_runs_linear_kernel(
    translation_model, synthetic_tokenizer, pairs, tmp_path, monkeypatch, kernel
):
    monkeypatch.setattr(onednn, "x86_64", lambda: True)  # where "auto" means oneDNN
    seen = []
    real_forward = OneDNNLinear.forward

    def spy(self, x):
        seen.append(type(self))
        return real_forward(self, x)

    monkeypatch.setattr(OneDNNLinear, "forward", spy)
    validator = _validator(
        pairs, synthetic_tokenizer, tmp_path, valid_bleu_sentences=5, linear_kernel=kernel
    )
    metrics = validator.validate(translation_model)
    assert "bleu" in metrics
    assert bool(seen) == (kernel == "auto" and onednn.onednn_available())


def test_best_and_early_stopping_counters(translation_model, synthetic_tokenizer, pairs, tmp_path):
    validator = _validator(
        pairs, synthetic_tokenizer, tmp_path, best_metric="loss", early_stop_patience=2
    )
    state = TrainState()
    decisions = []
    for step, loss in enumerate([3.0, 2.5, 2.7, 2.4, 2.6, 2.9], start=1):
        state.step = step
        decisions.append(validator.record({"loss": loss}, state, elapsed_minutes=step / 10))
    # best at 3.0, 2.5, then 2.7 is worse (1), 2.4 best again, 2.6 (1), 2.9 (2: stop)
    assert decisions == [
        (True, False),
        (True, False),
        (False, False),
        (True, False),
        (False, False),
        (False, True),
    ]
    assert (state.best_metric, state.best_step, state.bad_validations) == (2.4, 4, 2)
    records = validator.metrics.read()
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert [r["best"] for r in records] == [d[0] for d in decisions]
    assert all(r["type"] == "valid" for r in records)


@pytest.mark.parametrize("best_metric", ["loss", "bleu"])
def test_the_log_names_the_metric_a_best_validation_is_best_by(
    best_metric, translation_model, synthetic_tokenizer, pairs, tmp_path
):
    """`(best)` after the BLEU figure read as "best BLEU" when the choice was by loss."""
    validator = _validator(pairs, synthetic_tokenizer, tmp_path, best_metric=best_metric)
    lines = []
    validator.log = lines.append
    state = TrainState()
    validator.record({"loss": 3.0, "ppl": 20.1, "bleu": 1.5}, state, elapsed_minutes=0.1)
    assert lines == [f"validation at step 0: loss 3 ppl 20.1 bleu 1.50 (best {best_metric})"]


def test_the_log_shows_bleu_with_two_decimals_as_sacrebleu(
    translation_model, synthetic_tokenizer, pairs, tmp_path
):
    """It showed four significant digits: "bleu 0.008135" beside sacreBLEU's "0.01"."""
    validator = _validator(pairs, synthetic_tokenizer, tmp_path, best_metric="loss")
    lines = []
    validator.log = lines.append
    validator.record({"loss": 7.25, "ppl": 1408.1, "bleu": 0.008135}, TrainState(), 0.1)
    assert lines == ["validation at step 0: loss 7.25 ppl 1408 bleu 0.01 (best loss)"]


def test_early_stopping_after_patience_validations_without_improvement(
    tmp_path, tiny_run, monkeypatch
):
    from transformer.train import validation
    from transformer.train.trainer import Trainer

    losses = iter([3.0, 3.5, 3.2, 2.0, 1.0])  # best at the first validation, then two worse
    monkeypatch.setattr(
        validation.Validator, "validate", lambda self, model: {"loss": next(losses)}
    )
    overrides = [
        "train.log_interval_steps=1",
        "train.num_threads=1",
        f"train.output_dir={tmp_path / 'run'}",
        "train.max_steps=20",
        "train.validate_interval_steps=1",
        "train.best_metric=loss",
        "train.early_stop_patience=2",
        "train.save_interval_steps=null",
    ]
    state = Trainer(tiny_run.load(overrides)).train()
    assert state.stop_reason == "early_stopping"
    assert state.step == 3 and state.best_step == 1
