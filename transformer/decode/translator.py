"""Translate text with a trained model: the one-call Python API.

    from transformer import Translator
    translator = Translator.from_checkpoint("checkpoints/run/checkpoint_best.pt")
    translator("A man is eating.")                                  # -> "Ein Mann isst."
    translator.translate(["A man is eating."], beam_size=4)         # -> ["Ein Mann isst."]
    translator.translate_nbest(["A man is eating."], nbest=2)
    # -> [[("Ein Mann isst.", -0.41), ("Ein Mann isst etwas.", -0.63)]]
    translator.translate("A man is eating.", sampling=True, top_p=0.9, seed=1)
    translator.translate("A man is eating.", prefix="Ein Mann")    # starts with "Ein Mann"
    translator.score("A man is eating.", "Ein Mann isst.")         # Score(log_prob, length, score)
    translator.generate("A man is eating.", alignment=True)[0].alignment  # [(0, 0), (1, 1), ...]
    Translator.from_checkpoints(["run1/avg.pt", "run2/avg.pt"])    # an ensemble

Defaults: every decoding option (the fields of `DecodeConfig`) defaults to the translator's
`decode`, its checkpoint's `decode:` section (`DecodeConfig()`, the paper's settings, for a
model given without a config), as on the command line; an option given to a call overrides it
for that call. Options are checked once, before any work (`transformer.decode.inputs`).

Sentences are encoded, sorted by length and cut into batches of at most `max_tokens` source
tokens (padding included, `transformer.decode.batched`), decoded with `beam_search`,
`greedy_search` or `sample_search`, and returned in input order. An empty or whitespace-only
sentence gives an empty translation without going through the model (whatever its prefix),
so it never changes its neighbours' batches or results.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from pathlib import Path

import torch

from transformer.attention_backends import without_cudnn_attention
from transformer.cpu.onednn import use_onednn
from transformer.decode.alignment import check_layer
from transformer.decode.batched import batches
from transformer.decode.config import DecodeConfig
from transformer.decode.ensemble import as_models, check_vocabularies, load_ensemble
from transformer.decode.generation import Translation, align_batch, prefix_ids, search_batch
from transformer.decode.inputs import Request, as_batch, check_flag, parse_options
from transformer.decode.sampling import stream_seed
from transformer.decode.scoring import padded, score_ids
from transformer.device import resolve_device

# How `use_onednn` names a model's parameter dtype.
PRECISION_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
# The options `Translator.score` takes (a search setting would be silently ignored there).
SCORE_OPTIONS = ("length_penalty", "length_penalty_style", "max_tokens", "progress")


def _precision(model: torch.nn.Module) -> str:
    """The precision the model computes in: its parameters' dtype, named as `use_onednn`
    expects ("fp32", "bf16", "fp16", else the dtype's name); "fp32" without parameters."""
    parameter = next(model.parameters(), None)
    if parameter is None:
        return "fp32"
    return PRECISION_NAMES.get(parameter.dtype, str(parameter.dtype).removeprefix("torch."))


class Translator:
    """A model (or an ensemble) plus its tokenizer, translating raw sentences.

    Args:
        model: A `Transformer`, or a list of them with one vocabulary (an ensemble,
            `transformer.decode.ensemble`); moved to `device`, put in eval mode while
            translating and returned to its previous mode afterwards.
        tokenizer: The `Tokenizer` the model was trained with.
        device: Where to run ("auto", "cpu", "cuda", "cuda:1", a torch.device), checked by
            `transformer.device.resolve_device`.
        config: The full `Config` of the run, when known (`from_checkpoint` sets it); its
            `decode` section is the default of every decoding option.
        linear_kernel: How float32 CPU products are computed while translating: "auto"
            (oneDNN for a float32 model on x86-64 CPUs, `transformer.cpu.onednn`), "onednn" or
            "torch" (also for a model whose layers are already oneDNN ones). The model's
            layers are swapped for the call only; the model is returned as it was given.

    Attributes:
        models: The models (one unless an ensemble); `model` is the first.
        decode: The default decoding settings (`config.decode`, else `DecodeConfig()`).

    Raises:
        ValueError: for an unknown or unavailable device, a linear kernel that cannot run
            there (such as "onednn" for a bfloat16 model), or ensemble members whose
            vocabularies differ.
    """

    def __init__(self, model, tokenizer, device="cpu", config=None, linear_kernel="auto") -> None:
        self.device = resolve_device(device, what="device")
        models = as_models(model)
        check_vocabularies(models)
        flags = [use_onednn(linear_kernel, self.device, _precision(m)) for m in models]
        self.onednn = all(flags)
        self.models = [m.to(self.device) for m in models]
        self.model = self.models[0]
        self.tokenizer = tokenizer
        self.config = config
        self.decode = config.decode if config is not None else DecodeConfig()

    @classmethod
    def from_checkpoint(cls, path: str | Path, device="cpu", linear_kernel="auto") -> Translator:
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

    @classmethod
    def from_checkpoints(cls, paths: Sequence[str | Path], device="cpu", linear_kernel="auto"):
        """An ensemble of checkpoints with one vocabulary; the first one's `decode` section is
        the default (see `transformer.decode.ensemble.load_ensemble`).

        Raises:
            FileNotFoundError, ValueError: as `from_checkpoint`, for a single path instead of
                a list, or for a checkpoint whose vocabulary differs from the first one's.
        """
        if isinstance(paths, (str, Path)):
            raise ValueError(f"from_checkpoints takes a list of paths, not {str(paths)!r}")
        models, tokenizer, config = load_ensemble(list(paths), device=device)
        return cls(models, tokenizer, device=device, config=config, linear_kernel=linear_kernel)

    def __call__(self, sentences: str | Sequence[str], **options) -> str | list[str]:
        """`translate(sentences, **options)`, as `pipeline` users expect."""
        return self.translate(sentences, **options)

    def translate(self, sentences: str | Sequence[str], **options) -> str | list[str]:
        """Translate sentences; one output per input, in order.

        Args:
            sentences: A raw source sentence, or a list or tuple of them.
            options: Any field of `DecodeConfig`, overriding the translator's `decode`:
                beam_size, length_penalty, length_penalty_style, max_len_a, max_len_b,
                max_tokens; sampling, temperature, top_k, top_p, num_samples, seed (sampling
                returns the best-scored of its samples). And: greedy (bool: greedy search
                instead of beam search; `beam_size` is still checked, then ignored), prefix
                (target text each translation must start with: a string per sentence, ""
                for none), progress (bool: a tqdm bar on stderr, when a terminal).

        Returns:
            The translation (a string for a string); "" for an empty or whitespace-only input.

        Raises:
            ValueError: for an unknown option, a setting of the wrong type or out of range
                (the rules of `DecodeConfig`, checked before anything is translated), greedy
                with sampling, a prefix too long for the model, or input other than a string
                or a list or tuple of strings.
        """
        batch, single = as_batch(sentences)
        request = parse_options(self.decode, options, len(batch), single)
        texts = [found[0].text if found else "" for found in self._generate(batch, request, 1)]
        return texts[0] if single else texts

    def translate_nbest(self, sentences: str | Sequence[str], nbest: int | None = None, **options):
        """The `nbest` best translations of each sentence (beam search or sampling), scored.

        Args:
            sentences: As in `translate`.
            nbest: Translations per sentence, 1 <= nbest <= beam_size (num_samples when
                sampling); None = all of them.
            options: As in `translate` (not greedy).

        Returns:
            For each sentence (or the single one), (translation, score) pairs best first;
            the score is log P(Y | X) / lp(|Y|). An empty input gives [("", 0.0)].

        Raises:
            ValueError: as `translate`; also for nbest outside [1, beam_size]
                (`DecodeConfig.check_nbest`) or with greedy.
        """
        batch, single = as_batch(sentences)
        request = parse_options(self.decode, options, len(batch), single)
        nbest = request.decode.rows_per_sentence if nbest is None else nbest
        self._check_nbest(request, nbest)
        results = [
            [(t.text, t.score) for t in found] if found else [("", 0.0)]
            for found in self._generate(batch, request, nbest)
        ]
        return results[0] if single else results

    def generate(
        self, sentences, nbest=1, alignment=False, alignment_layer=-1, first_index=0, **options
    ):
        """Everything about each translation: text, score, log P, ids and word alignment.

        Args:
            sentences, nbest: As in `translate_nbest` (nbest 1 with greedy).
            alignment: Also align each translation to its source (Pharaoh pairs).
            alignment_layer: The decoder layer whose cross-attention aligns (0-based, -1
                the last; `transformer.decode.alignment`).
            first_index: Index of sentences[0] in a longer stream: sampling draws sentence
                i's numbers from (seed, first_index + i), so a file translated in chunks
                samples what it samples in one call.
            options: The options of `translate`.

        Returns:
            For each sentence (or the single one), its `Translation`s best first; [] for an
            empty input.
        """
        batch, single = as_batch(sentences)
        request = parse_options(self.decode, options, len(batch), single)
        self._check_nbest(request, nbest)
        check_flag("alignment", alignment)
        if alignment:
            for model in self.models:  # every member aligns with that layer
                check_layer(model, alignment_layer)
        integer = isinstance(first_index, numbers.Integral) and not isinstance(first_index, bool)
        if not integer or first_index < 0:
            raise ValueError(f"first_index ({first_index!r}) must be an integer >= 0")
        layer = alignment_layer if alignment else None
        results = self._generate(batch, request, nbest, layer, first_index)
        return results[0] if single else results

    def score(self, sources: str | Sequence[str], targets: str | Sequence[str], **options):
        """log P(target | source) of given pairs, by one teacher-forced pass per batch.

        Args:
            sources, targets: Raw sentences, pair by pair (two strings, or two lists).
            options: length_penalty, length_penalty_style, max_tokens (tokens of the longer
                side per batch), progress; default: the translator's `decode`.

        Returns:
            One `transformer.decode.scoring.Score` per pair (log_prob, length, score and
            per_token), or a single one for two strings.

        Raises:
            ValueError: for sources and targets that do not pair up, a source without tokens,
                or an option `score` does not take or out of range.
        """
        srcs, single = as_batch(sources, "sources")
        tgts, single_target = as_batch(targets, "targets")
        if single != single_target or len(srcs) != len(tgts):
            raise ValueError(
                f"sources and targets must pair up: {len(srcs)} sources, {len(tgts)} targets"
            )
        request = parse_options(self.decode, options, len(srcs), single, SCORE_OPTIONS)
        src_ids = self.tokenizer.encode_batch(srcs)
        for index, ids in enumerate(src_ids):
            if not ids:
                raise ValueError(f"sources[{index}] has no tokens: log P(Y | X) needs a source")
        tgt_ids = self.tokenizer.encode_target_batch(tgts)
        with without_cudnn_attention(self.device):
            scores = score_ids(self.models, src_ids, tgt_ids, request, self.onednn, self.device)
        return scores[0] if single else scores

    def _check_nbest(self, request: Request, nbest: int) -> None:
        """nbest within the beam (or the samples); greedy returns one hypothesis."""
        if request.greedy and nbest != 1:
            raise ValueError(f"nbest ({nbest}) needs beam search or sampling, not greedy")
        if not request.greedy:
            request.decode.check_nbest(nbest)

    def _generate(
        self, sentences: list[str], request: Request, nbest: int, layer=None, first_index=0
    ) -> list[list[Translation]]:
        """Encode, batch by length, search each batch (and align), restore input order."""
        decode, pad_id = request.decode, self.model.config.pad_id
        results: list[list[Translation]] = [[] for _ in sentences]
        non_empty = [i for i, text in enumerate(sentences) if text.strip()]
        encoded = self.tokenizer.encode_batch([sentences[i] for i in non_empty])
        todo = [(i, ids) for i, ids in zip(non_empty, encoded, strict=True) if ids]
        limit = min(m.config.max_positions for m in self.models)
        prefixes = prefix_ids(self.tokenizer, request.prefix, [i for i, _ in todo], limit)
        seed = decode.seed
        if decode.sampling and seed is None:
            seed = int(torch.randint(0, 2**63 - 1, ()))  # torch's global generator
        rows = 1 if request.greedy else decode.rows_per_sentence
        skipped = len(sentences) - len(todo)
        lengths = [len(ids) for _, ids in todo]
        for group in batches(
            lengths, decode.max_tokens, self.models, self.onednn, rows, request.progress, skipped
        ):
            src = padded([todo[k][1] for k in group], pad_id, self.device)
            prefix = [prefixes[k] for k in group] if prefixes else None
            seeds = (
                [stream_seed(seed, first_index + todo[k][0]) for k in group]
                if decode.sampling
                else None
            )
            with without_cudnn_attention(self.device):  # a new key length at every step
                found = search_batch(self.models, src, request, nbest, prefix, seeds)
            src_ids = [todo[k][1] for k in group]
            aligned = align_batch(self.models, self.tokenizer, src, found, src_ids, layer)
            for k, hypotheses, pairs in zip(group, found, aligned, strict=True):
                texts = [self.tokenizer.decode(h.tokens) for h in hypotheses]
                results[todo[k][0]] = [
                    Translation(text, h.score, h.log_prob, h.tokens, h.finished, a)
                    for text, h, a in zip(texts, hypotheses, pairs, strict=True)
                ]
        return results
