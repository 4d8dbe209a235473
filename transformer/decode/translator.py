"""Translate text with a trained model: the one-call Python API.

    from transformer import Translator
    translator = Translator.from_checkpoint("checkpoints/run/checkpoint_best.pt")
    translator.translate(["A man is eating."], beam_size=4)          # -> ["Ein Mann isst."]
    translator.translate_nbest(["A man is eating."], beam_size=4, nbest=2)
    # -> [[("Ein Mann isst.", -0.41), ("Ein Mann isst etwas.", -0.63)]]

Sentences are encoded, sorted by length and cut into batches of at most `max_tokens` source
tokens (padding included), decoded with `beam_search` or `greedy_search`, and returned in input
order. An empty or whitespace-only sentence gives an empty translation without going through the
model, so it never changes its neighbours' batches or results. The public methods check the
caller's settings, once, by building a `DecodeConfig`; the searches below trust them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch
from tqdm import tqdm

from transformer.cpu.onednn import onednn_linear_layers, prepacked_weights, use_onednn
from transformer.data.batching import length_sorted_batches
from transformer.decode.beam_search import beam_search
from transformer.decode.config import DecodeConfig
from transformer.decode.greedy import greedy_search
from transformer.decode.search import Hypothesis
from transformer.device import resolve_device

# How `use_onednn` names a model's parameter dtype.
PRECISION_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _precision(model: torch.nn.Module) -> str:
    """The precision the model computes in: its parameters' dtype, named as `use_onednn`
    expects ("fp32", "bf16", "fp16", else the dtype's name); "fp32" without parameters."""
    parameter = next(model.parameters(), None)
    if parameter is None:
        return "fp32"
    return PRECISION_NAMES.get(parameter.dtype, str(parameter.dtype).removeprefix("torch."))


def _check_sentences(sentences: Sequence[str]) -> None:
    """Refuse anything but a list or tuple (a non-string sequence) of strings, naming it."""
    if isinstance(sentences, str):
        raise ValueError("sentences must be a list of strings, not a single string")
    if not isinstance(sentences, Sequence) or isinstance(sentences, bytes):
        raise ValueError(
            f"sentences must be a list or tuple of strings, not {type(sentences).__name__}"
        )
    for index, text in enumerate(sentences):
        if not isinstance(text, str):
            raise ValueError(
                f"sentences[{index}] is a {type(text).__name__}, not a string: {text!r}"
            )


def _check_flag(name: str, value: bool) -> None:
    """Refuse a flag that is not a bool (`greedy="no"` is truthy)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} ({value!r}) must be True or False")


@contextmanager
def _eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """Switch `model` to eval mode (no dropout) and restore its previous mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


class Translator:
    """A model plus its tokenizer, translating lists of raw sentences.

    Args:
        model: A `Transformer` (moved to `device`; put in eval mode while translating and
            returned to its previous mode afterwards).
        tokenizer: The `Tokenizer` the model was trained with.
        device: Where to run ("auto", "cpu", "cuda", "cuda:1", a torch.device), checked by
            `transformer.device.resolve_device`.
        config: The full `Config` of the run, when known (`from_checkpoint` sets it).
        linear_kernel: How float32 CPU products are computed while translating: "auto"
            (oneDNN for a float32 model on x86-64 CPUs, `transformer.cpu.onednn`), "onednn" or
            "torch" (also for a model whose layers are already oneDNN ones). The model's
            layers are swapped for the call only; the model is returned as it was given.

    Raises:
        ValueError: for an unknown or unavailable device, or a linear kernel that cannot run
            there (such as "onednn" for a bfloat16 model).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        device: str | torch.device = "cpu",
        config=None,
        linear_kernel: str = "auto",
    ) -> None:
        self.device = resolve_device(device, what="device")
        self.onednn = use_onednn(linear_kernel, self.device, _precision(model))
        self.model = model.to(self.device)
        self.tokenizer = tokenizer
        self.config = config

    @classmethod
    def from_checkpoint(
        cls, path: str | Path, device: str | torch.device = "cpu", linear_kernel: str = "auto"
    ) -> Translator:
        """Load a checkpoint written by training or averaging (see `load_checkpoint`).

        Args:
            path: The checkpoint file.
            device: As in `Translator`.
            linear_kernel: As in `Translator`; a choice of this machine, never the checkpoint's.

        Raises:
            FileNotFoundError, ValueError: a missing file, a file that is not a checkpoint, or
                an incompatible format version, naming the path.
        """
        from transformer.checkpoint import load_checkpoint

        model, tokenizer, config = load_checkpoint(path, device=device)
        return cls(model, tokenizer, device=device, config=config, linear_kernel=linear_kernel)

    def translate(
        self,
        sentences: Sequence[str],
        beam_size: int = 4,
        greedy: bool = False,
        length_penalty: float = 0.6,
        length_penalty_style: str = "gnmt",
        max_len_a: float = 1.0,
        max_len_b: int = 50,
        max_tokens: int = 4096,
        progress: bool = False,
    ) -> list[str]:
        """Translate sentences; one output per input, in order.

        Args:
            sentences: Raw source sentences.
            beam_size: Beams per sentence (the paper: 4); 1 runs beam search with one beam.
            greedy: Use greedy decoding instead of beam search (`beam_size` is still checked,
                then ignored).
            length_penalty: alpha of the GNMT length penalty (the paper: 0.6).
            length_penalty_style: "gnmt" or "power" (see `transformer.decode.search`).
            max_len_a, max_len_b: Maximum output length = a * source tokens + b.
            max_tokens: Source tokens per batch, padding included.
            progress: Show a tqdm progress bar (sentences) on stderr.

        Returns:
            Detokenized translations; "" for an empty or whitespace-only input.

        Raises:
            ValueError: for a setting of the wrong type or out of range (the rules of
                `DecodeConfig`, checked before anything is translated; `greedy` and
                `progress` must be bools), or for input other than a list or tuple of strings.
        """
        _check_flag("greedy", greedy)
        _check_flag("progress", progress)
        _check_sentences(sentences)
        decode = DecodeConfig(
            beam_size=beam_size,
            length_penalty=length_penalty,
            length_penalty_style=length_penalty_style,
            max_len_a=max_len_a,
            max_len_b=max_len_b,
            max_tokens=max_tokens,
        )
        results = self._decode(sentences, decode, nbest=None if greedy else 1, progress=progress)
        return [self._detokenize(hyps[0]) if hyps else "" for hyps in results]

    def translate_nbest(
        self,
        sentences: Sequence[str],
        beam_size: int = 4,
        nbest: int = 4,
        length_penalty: float = 0.6,
        length_penalty_style: str = "gnmt",
        max_len_a: float = 1.0,
        max_len_b: int = 50,
        max_tokens: int = 4096,
        progress: bool = False,
    ) -> list[list[tuple[str, float]]]:
        """The `nbest` best beam-search translations of each sentence, with their scores.

        Args:
            sentences: Raw source sentences.
            beam_size: Beams per sentence; must be at least `nbest`.
            nbest: Translations returned per sentence.
            length_penalty, length_penalty_style, max_len_a, max_len_b, max_tokens, progress:
                As in `translate`.

        Returns:
            For each sentence, (translation, score) pairs best first; the score is
            log P(Y | X) / lp(|Y|) (`transformer.decode.search.Hypothesis.score`). An empty
            input gives [("", 0.0)].

        Raises:
            ValueError: when nbest is not in [1, beam_size] (`DecodeConfig.check_nbest`), for
                a setting of the wrong type or out of range (as `translate`), or for input
                other than a list or tuple of strings.
        """
        _check_flag("progress", progress)
        _check_sentences(sentences)
        decode = DecodeConfig(
            beam_size=beam_size,
            length_penalty=length_penalty,
            length_penalty_style=length_penalty_style,
            max_len_a=max_len_a,
            max_len_b=max_len_b,
            max_tokens=max_tokens,
        )
        decode.check_nbest(nbest)
        results = self._decode(sentences, decode, nbest=nbest, progress=progress)
        return [
            [(self._detokenize(h), h.score) for h in hyps] if hyps else [("", 0.0)]
            for hyps in results
        ]

    def _decode(
        self, sentences: Sequence[str], decode: DecodeConfig, nbest: int | None, progress: bool
    ) -> list[list[Hypothesis] | None]:
        """Greedy search (`nbest` None) or beam search for `nbest` hypotheses, with the
        checked settings of `decode`; see `_search`."""
        settings = dict(
            length_penalty=decode.length_penalty,
            length_penalty_style=decode.length_penalty_style,
            max_len_a=decode.max_len_a,
            max_len_b=decode.max_len_b,
        )

        def search(src: torch.Tensor) -> list[list[Hypothesis]]:
            if nbest is None:
                return [[h] for h in greedy_search(self.model, src, **settings)]
            return beam_search(self.model, src, beam_size=decode.beam_size, nbest=nbest, **settings)

        beams = 1 if nbest is None else decode.beam_size
        return self._search(sentences, search, decode.max_tokens, progress, beams)

    def _detokenize(self, hypothesis: Hypothesis) -> str:
        return self.tokenizer.decode(hypothesis.tokens)

    def _search(
        self,
        sentences: Sequence[str],
        search: Callable[[torch.Tensor], list[list[Hypothesis]]],
        max_tokens: int,
        progress: bool,
        beams: int,
    ) -> list[list[Hypothesis] | None]:
        """Encode, batch by length, run `search` on each batch, restore input order.

        The weights are prepacked once for all batches when a decoding step of the largest
        batch has enough rows (sentences x `beams`) for it to pay (`prepacked_weights`).

        Returns:
            One list of hypotheses per sentence; None for sentences without source tokens.
        """
        results: list[list[Hypothesis] | None] = [None] * len(sentences)
        non_empty = [i for i, text in enumerate(sentences) if text.strip()]
        encoded = self.tokenizer.encode_batch([sentences[i] for i in non_empty])
        todo = [(i, ids) for i, ids in zip(non_empty, encoded, strict=True) if ids]
        pad_id = self.model.config.pad_id
        batches = length_sorted_batches([len(ids) for _, ids in todo], max_tokens)
        rows = max((len(batch) for batch in batches), default=0) * beams  # rows per step
        with (
            _eval_mode(self.model),
            onednn_linear_layers(self.model, enabled=self.onednn),
            prepacked_weights(self.model, rows),  # once for all batches, if worth it
            tqdm(total=len(sentences), disable=not progress, unit="sent") as bar,
        ):
            bar.update(len(sentences) - len(todo))
            for batch in batches:
                longest = len(todo[batch[0]][1])
                src = torch.full((len(batch), longest), pad_id, dtype=torch.long)
                for row, k in enumerate(batch):
                    ids = todo[k][1]
                    src[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
                for k, hypotheses in zip(batch, search(src.to(self.device)), strict=True):
                    results[todo[k][0]] = hypotheses
                bar.update(len(batch))
        return results
