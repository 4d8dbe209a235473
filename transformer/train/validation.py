"""Validation during training: loss, perplexity and sacreBLEU of greedy decoding.

BLEU goes through the same code as `transformer-evaluate`: `Translator.translate` for the
hypotheses and `bleu.corpus_scores` (sacreBLEU) for the score. Losses use natural logarithms:
perplexity = exp(nll per token). `Validator` runs these on rank 0 of a training job, shares the
result with every process, and keeps the best-checkpoint and early-stopping counters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager

import torch

from transformer.checkpoint import unwrap_model
from transformer.config import Config
from transformer.data.batching import BatchIterator
from transformer.data.prepare import PreparedData
from transformer.data.tokenizer import Tokenizer
from transformer.decode.config import DecodeConfig
from transformer.decode.translator import Translator
from transformer.evaluate.bleu import corpus_scores
from transformer.train.config import DECODED_METRICS, HIGHER_IS_BETTER
from transformer.train.distributed import DistributedContext, broadcast_object
from transformer.train.loss import label_smoothed_cross_entropy
from transformer.train.metrics_log import MetricsLog
from transformer.train.precision import autocast as precision_autocast
from transformer.train.state import TrainState


@torch.no_grad()
def validation_loss(
    model: torch.nn.Module,
    batches: Iterable,
    epsilon: float,
    pad_id: int,
    device: torch.device,
    autocast: AbstractContextManager,
) -> dict:
    """Label-smoothed loss, NLL and perplexity per real target token over `batches`.

    Args:
        model: The (un-wrapped) Transformer; switched to eval mode.
        batches: Batches with `src`, `tgt_in`, `tgt_out` (see `BatchIterator`).
        epsilon: Label smoothing (the training loss's, so the two are comparable).
        pad_id: Padding id.
        device: Where the model is.
        autocast: The training precision's autocast context (re-entered per batch).

    Returns:
        {"loss", "nll_loss", "ppl", "tokens"}; losses are per token (natural log).
    """
    model.eval()
    loss_sum = nll_sum = 0.0
    tokens = 0
    for batch in batches:
        with autocast:
            logits = model(batch.src.to(device), batch.tgt_in.to(device))
        out = label_smoothed_cross_entropy(logits, batch.tgt_out.to(device), epsilon, pad_id)
        loss_sum += out.loss.item()
        nll_sum += out.nll_loss.item()
        tokens += int(out.n_tokens.item())
    tokens_or_one = max(tokens, 1)
    nll = nll_sum / tokens_or_one
    return {
        "loss": loss_sum / tokens_or_one,
        "nll_loss": nll,
        "ppl": math.exp(min(nll, 700.0)),
        "tokens": tokens,
    }


@torch.no_grad()
def validation_bleu(
    model: torch.nn.Module,
    tokenizer: Tokenizer,
    src_text: list[str],
    ref_text: list[str],
    target_lang: str,
    device: torch.device,
    decode: DecodeConfig,
    linear_kernel: str,
) -> dict:
    """sacreBLEU of greedy decoding of `src_text` against `ref_text`.

    Args:
        model: The (un-wrapped) Transformer; switched to eval mode.
        tokenizer: The run's tokenizer.
        src_text: Raw source sentences.
        ref_text: One raw reference per source sentence.
        target_lang: Target language code (sacreBLEU tokenizer choice).
        device: Where the model is.
        decode: The `decode:` section (max_tokens per batch, max_len_a, max_len_b).
        linear_kernel: The run's `train.linear_kernel`, so that decoding computes its float32
            CPU products as training does (see `transformer.cpu.onednn`).

    Returns:
        {"bleu": float, "chrf": float} (whatever `corpus_scores` reports under those keys).
    """
    model.eval()
    translator = Translator(model, tokenizer, device=device, linear_kernel=linear_kernel)
    hyps = translator.translate(
        src_text,
        greedy=True,
        max_len_a=decode.max_len_a,
        max_len_b=decode.max_len_b,
        max_tokens=decode.max_tokens,
    )
    scores = corpus_scores(hyps, ref_text, target_lang=target_lang)
    return {key: float(scores[key]) for key in DECODED_METRICS if key in scores}


def is_improvement(metric: str, value: float, best: float | None) -> bool:
    """True when `value` of `metric` beats `best` (always, when there is no best yet)."""
    if best is None:
        return True
    return value > best if HIGHER_IS_BETTER[metric] else value < best


class Validator:
    """The periodic validation of a training job, with best/early-stopping bookkeeping.

    Metrics are computed on rank 0 and broadcast, so that every process takes the same
    best-checkpoint and early-stopping decisions; rank 0 writes them to metrics.jsonl.

    Args:
        prepared: The run's data: tokenizer, validation pairs (batched in order, at most
            `train.max_tokens` tokens per side) and raw validation text (for BLEU).
        config: The whole config (`train`, `model` special ids, `data.target_lang`, `decode`).
        context: This process's place in the job.
        precision: The resolved training precision ("fp32", "bf16", "fp16").
        metrics: The run's metrics log.
        log: Receives one-line messages (rank 0 only).
    """

    def __init__(
        self,
        prepared: PreparedData,
        config: Config,
        context: DistributedContext,
        precision: str,
        metrics: MetricsLog,
        log: Callable[[str], None],
    ) -> None:
        model = config.model
        ids = dict(pad_id=model.pad_id, bos_id=model.bos_id, eos_id=model.eos_id)
        self.batches = BatchIterator(prepared.valid, config.train.max_tokens, shuffle=False, **ids)
        self.src_text, self.ref_text = prepared.valid_src_text, prepared.valid_ref_text
        self.tokenizer, self.config, self.context = prepared.tokenizer, config, context
        self.precision, self.metrics, self.log = precision, metrics, log

    def validate(self, model: torch.nn.Module) -> dict:
        """Validation loss, perplexity and (unless disabled) greedy BLEU; collective.

        Args:
            model: The training model (possibly wrapped); put back in training mode.

        Returns:
            Rank 0's `validation_loss` metrics plus `validation_bleu`'s, on every process.
        """
        train, device = self.config.train, self.context.device
        metrics = None
        if self.context.is_main:
            model = unwrap_model(model)
            metrics = validation_loss(
                model,
                self.batches.epoch(1),
                train.label_smoothing,
                self.config.model.pad_id,
                device,
                precision_autocast(self.precision, device),
            )
            n = train.valid_bleu_sentences
            if n != 0:
                src = self.src_text[:n] if n else self.src_text
                ref = self.ref_text[: len(src)]
                lang = self.config.data.target_lang
                with precision_autocast(self.precision, device):
                    scores = validation_bleu(
                        model,
                        self.tokenizer,
                        src,
                        ref,
                        lang,
                        device,
                        self.config.decode,
                        train.linear_kernel,
                    )
                metrics.update(scores)
            model.train()
        return broadcast_object(metrics, self.context)

    def record(self, metrics: dict, state: TrainState, elapsed_minutes: float) -> tuple[bool, bool]:
        """Update the best/early-stopping counters of `state` and log `metrics`.

        Args:
            metrics: What `validate` returned.
            state: The run's progress counters (updated in place).
            elapsed_minutes: Training wall time so far (for the metrics record).

        Returns:
            (is_best, stop_early): whether `metrics` is the best so far, and whether
            `train.early_stop_patience` validations in a row have not improved on it.
        """
        train = self.config.train
        is_best = is_improvement(train.best_metric, metrics[train.best_metric], state.best_metric)
        if is_best:
            state.best_metric, state.best_step = metrics[train.best_metric], state.step
            state.bad_validations = 0
        else:
            state.bad_validations += 1
        patience = train.early_stop_patience
        stop_early = patience is not None and state.bad_validations >= patience
        if self.context.is_main:
            record = {"type": "valid", "step": state.step, **metrics, "best": is_best}
            self.metrics.write({**record, "elapsed_minutes": elapsed_minutes})
            # BLEU with two decimals, as sacreBLEU prints it; the loss to four digits.
            formats = {"loss": ".4g", "ppl": ".4g", "bleu": ".2f"}
            shown = " ".join(f"{k} {metrics[k]:{f}}" for k, f in formats.items() if k in metrics)
            self.log(
                f"validation at step {state.step}: {shown}"
                + (f" (best {train.best_metric})" if is_best else "")
            )
        return is_best, stop_early
