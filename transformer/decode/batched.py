"""Running a model over many sentences: length-sorted batches, inference mode, input order.

`Translator` encodes its sentences, sorts them by length and cuts them into batches of at most
`max_tokens` tokens (padding included, `transformer.data.batching.length_sorted_batches`); each
batch is decoded or scored as one tensor, and the results go back to input order. While the
batches run, every model is in eval mode (restored afterwards), its float32 CPU products run on
oneDNN when asked (`transformer.cpu.onednn`), and its weights are prepacked once for all
batches when a step has enough rows for that to pay.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import torch
from tqdm import tqdm

from transformer.cpu.onednn import onednn_linear_layers, prepacked_weights
from transformer.data.batching import length_sorted_batches


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """Switch `model` to eval mode (no dropout) and restore its previous mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@contextmanager
def inference(models: Sequence[torch.nn.Module], onednn: bool, rows: int) -> Iterator[None]:
    """Eval mode, oneDNN layers (if `onednn`) and prepacked weights for every model.

    Args:
        models: The models (one, or an ensemble's members).
        onednn: Swap float32 linear layers for oneDNN ones during the block.
        rows: Rows of the largest decoding step (sentences x beams), for `prepacked_weights`.
    """
    with ExitStack() as stack:
        for model in models:
            stack.enter_context(eval_mode(model))
            stack.enter_context(onednn_linear_layers(model, enabled=onednn))
            stack.enter_context(prepacked_weights(model, rows))  # once for all batches
        yield


def batches(
    lengths: Sequence[int],
    max_tokens: int,
    models: Sequence[torch.nn.Module],
    onednn: bool,
    rows_per_sentence: int = 1,
    progress: bool = False,
    skipped: int = 0,
) -> Iterator[list[int]]:
    """Yield batches of indices into `lengths`, longest first, within `inference`.

    Args:
        lengths: Tokens of each item (the padded cost of an item in its batch).
        max_tokens: Tokens per batch, padding included.
        models, onednn: See `inference`.
        rows_per_sentence: Rows one item takes in a decoding step (beams or samples).
        progress: Show a tqdm bar (items) on stderr when it is a terminal.
        skipped: Items done without the model (empty lines), counted on the bar at once.

    Yields:
        Lists of indices; every index appears once.
    """
    groups = length_sorted_batches(lengths, max_tokens)
    rows = max((len(group) for group in groups), default=0) * rows_per_sentence
    total = len(lengths) + skipped
    with (
        inference(models, onednn, rows),
        tqdm(total=total, disable=None if progress else True, unit="sent") as bar,  # None: a tty
    ):
        bar.update(skipped)
        for group in groups:
            yield group
            bar.update(len(group))
