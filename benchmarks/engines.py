"""The three engines `benchmarks/benchmark.py` compares, built with identical arithmetic.

- "ours": `transformer.Transformer`, decoded by the project's own `greedy_search`/`beam_search`,
  with its defaults as the trainer and `Translator` apply them: on an x86-64 CPU in float32 its
  linear layers are swapped for oneDNN ones (`train.linear_kernel: auto`,
  `transformer/cpu/onednn.py`) and every search runs inside `prepacked_weights`.
- "torch_nn": `torch.nn.Transformer` with the same tied embedding / output projection, the
  sqrt(d_model) embedding scale and the same sinusoidal encodings; its two extra final
  LayerNorms are removed and its attention and feed-forward dropouts set to 0, so it computes the
  paper's post-norm model with residual dropout only, like ours.
- "hf": Hugging Face `MarianMTModel` (random weights) with the same sizes, ReLU, scaled
  embeddings, static sinusoidal positions, dropout 0.1 on residuals only, one shared embedding
  matrix tied to the output projection.

Every engine trains with the same step (PyTorch's fused Adam, which our trainer uses and Hugging
Face's Trainer uses by default with torch >= 2.8; label-smoothed cross-entropy ignoring padding) and
decodes with EOS suppressed and a forced output length, so every system emits the same tokens
count. Each engine runs inside its own worker process (`benchmarks/workers.py`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch
from torch.nn import functional as F

from benchmarks.peers import BOS_ID, EOS_ID, PAD_ID, TorchNNPeer, marian_peer
from transformer import ModelConfig, Transformer
from transformer.cpu.onednn import prepacked_weights, swap_linear_layers, use_onednn
from transformer.decode.beam_search import beam_search
from transformer.decode.greedy import greedy_search

FIRST_WORD_ID = 4  # ids 0-3 are pad, unk, bos, eos


@dataclass(frozen=True)
class Dims:
    """Model sizes shared by every engine (defaults: the paper's base model, Table 3).

    Args:
        vocab_size: Shared source/target vocabulary V.
        d_model, d_ff, n_heads: Widths D, F and heads H.
        n_layers: Encoder layers = decoder layers N.
        dropout: Residual dropout P_drop (the only dropout, as in the paper).
        max_positions: Positional table size (must exceed the longest output).
    """

    vocab_size: int = 37000
    d_model: int = 512
    d_ff: int = 2048
    n_heads: int = 8
    n_layers: int = 6
    dropout: float = 0.1
    max_positions: int = 1024

    def model_config(self) -> ModelConfig:
        """Our `ModelConfig` with these sizes (post-norm, shared embeddings, SDPA)."""
        return ModelConfig(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            d_ff=self.d_ff,
            n_heads=self.n_heads,
            n_encoder_layers=self.n_layers,
            n_decoder_layers=self.n_layers,
            dropout=self.dropout,
            max_positions=self.max_positions,
        )


def random_batch(batch_size: int, length: int, vocab_size: int, seed: int) -> dict[str, list]:
    """Random training batch, right-padded, as nested lists (sent to every worker unchanged).

    Sentence lengths are drawn from [3/4 length, length]; the first sentence has the full length.

    Returns:
        {"src": (B, S), "tgt_in": (B, T) bos + target, "tgt_out": (B, T) target + eos}.
    """
    g = torch.Generator().manual_seed(seed)
    src_lengths = torch.randint((3 * length) // 4, length + 1, (batch_size,), generator=g)
    tgt_lengths = torch.randint((3 * length) // 4, length + 1, (batch_size,), generator=g)
    src_lengths[0] = tgt_lengths[0] = length
    positions = torch.arange(length).unsqueeze(0)  # (1, L)
    src = torch.randint(FIRST_WORD_ID, vocab_size, (batch_size, length), generator=g)
    src = src.masked_fill(positions >= src_lengths.unsqueeze(1), PAD_ID)
    words = torch.randint(FIRST_WORD_ID, vocab_size, (batch_size, length), generator=g)
    n_words = (tgt_lengths - 1).unsqueeze(1)  # (B, 1) words before eos
    bos = torch.full((batch_size, 1), BOS_ID)
    tgt_in = torch.cat((bos, words[:, :-1]), dim=1)  # (B, L): bos w1 ... w_{L-1}
    tgt_in = tgt_in.masked_fill(positions > n_words, PAD_ID)
    tgt_out = words.masked_fill(positions == n_words, EOS_ID).masked_fill(
        positions > n_words, PAD_ID
    )
    return {"src": src.tolist(), "tgt_in": tgt_in.tolist(), "tgt_out": tgt_out.tolist()}


def random_sources(batch_size: int, length: int, vocab_size: int, seed: int) -> list[list[int]]:
    """Random right-padded source sentences for decoding, as nested lists (B, S)."""
    return random_batch(batch_size, length, vocab_size, seed)["src"]


def _timed(fn):
    """Run `fn()`; return (result, wall seconds, CPU seconds of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


class EosSuppressed(torch.nn.Module):
    """Our model as the searches see it, with the eos logit set to -inf at every step.

    This is the benchmark's logits processor (Hugging Face's `min_new_tokens` does the same):
    with `max_len_a=0, max_len_b=n` every output then has exactly n tokens. It is a module
    holding the model as a submodule, so `prepacked_weights(wrapper)` packs the model's layers.
    """

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model
        self.config = model.config

    def encode(self, *args, **kwargs):
        return self.model.encode(*args, **kwargs)

    def init_cache(self, *args, **kwargs):
        return self.model.init_cache(*args, **kwargs)

    def decode(self, *args, **kwargs):
        logits = self.model.decode(*args, **kwargs)  # (R, t, V)
        logits[..., self.config.eos_id] = float("-inf")
        return logits


class Engine:
    """One model plus the benchmark's training step and searches, living in a worker process.

    Args:
        name: "ours", "torch_nn" or "hf".
        dims: Model sizes.
        seed: Seed of the random weights.
        device: "cpu" or "cuda".
        compile_model: Wrap the model in `torch.compile` (item 4).

    Attributes:
        onednn: Ours only: whether its linear layers were swapped for `OneDNNLinear`, by the
            policy of `train.linear_kernel: auto` (`use_onednn`): float32 on an x86-64 CPU
            outside torch.compile. Under bf16 autocast the swapped layers compute with
            `torch.nn.functional.linear`, as plain layers do, so one swap at build serves both.
    """

    def __init__(
        self, name: str, dims: Dims, seed: int = 0, device: str = "cpu", compile_model=False
    ) -> None:
        torch.manual_seed(seed)
        self.name, self.dims, self.device = name, dims, torch.device(device)
        if name == "ours":
            model = Transformer(dims.model_config())
        elif name == "torch_nn":
            model = TorchNNPeer(dims)
        elif name == "hf":
            model = marian_peer(dims)
        else:
            raise ValueError(f"engine ({name!r}) must be 'ours', 'torch_nn' or 'hf'")
        model = model.to(self.device)
        self.onednn = name == "ours" and use_onednn("auto", self.device, "fp32", compile_model)
        if self.onednn:
            swap_linear_layers(model)  # in place: same parameters, as the trainer does
        self.optimizer = torch.optim.Adam(
            model.parameters(),
            lr=1e-5,
            betas=(0.9, 0.98),
            eps=1e-9,
            fused=True,  # every engine: ours trains with it, HF's Trainer defaults to it
        )
        self.model = torch.compile(model) if compile_model else model

    def describe(self) -> dict:
        """Parameter count and attention implementation, for the report."""
        trained = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        frozen = sum(p.numel() for p in self.model.parameters() if not p.requires_grad)
        info = {"engine": self.name, "parameters": trained, "dims": asdict(self.dims)}
        if self.name == "ours":
            info["linear_layers"] = "oneDNN" if self.onednn else "torch.nn.Linear"
        if frozen:  # HF Marian stores its sinusoidal table as a frozen parameter
            info["frozen_parameters"] = frozen
        if self.name == "hf":
            import transformers

            info["attn_implementation"] = self.model.config._attn_implementation
            info["transformers_version"] = transformers.__version__
        return info

    def _tensor(self, rows: list[list[int]]) -> torch.Tensor:
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    def _logits(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        if self.name == "hf":  # no decoder cache while training (HF would build one by default)
            out = self.model(
                input_ids=src,
                attention_mask=src.ne(PAD_ID),
                decoder_input_ids=tgt_in,
                use_cache=False,
            )
            return out.logits
        return self.model(src, tgt_in)

    def train(self, batch: dict[str, list], steps: int, bf16: bool = False) -> list[dict]:
        """Run `steps` training steps (forward, loss, backward, Adam step) on one batch.

        Returns:
            Per step: {"seconds", "cpu_seconds", "tokens"} (tokens = real target tokens).
        """
        src, tgt_in, tgt_out = (self._tensor(batch[k]) for k in ("src", "tgt_in", "tgt_out"))
        tokens = int(tgt_out.ne(PAD_ID).sum())
        self.model.train()

        def step() -> None:
            self.optimizer.zero_grad(set_to_none=True)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bf16):
                logits = self._logits(src, tgt_in)  # (B, T, V)
            loss = F.cross_entropy(
                logits.float().flatten(0, 1),  # (B, T, V) -> (B*T, V)
                tgt_out.flatten(),
                ignore_index=PAD_ID,
                label_smoothing=0.1,
            )
            loss.backward()
            self.optimizer.step()
            if self.device.type == "cuda":
                torch.cuda.synchronize()

        results = []
        for _ in range(steps):
            _, wall, cpu = _timed(step)
            results.append({"seconds": wall, "cpu_seconds": cpu, "tokens": tokens})
        return results

    @torch.no_grad()
    def decode(self, src: list[list[int]], length: int, beam_size: int = 1, cache: bool = True):
        """Translate `src` into exactly `length` tokens per sentence (EOS suppressed).

        Args:
            src: Source ids (B, S), right-padded.
            length: Output tokens per sentence.
            beam_size: 1 = greedy search, else beam search with that many beams.
            cache: Ours only: False runs our search without the key/value cache.

        Returns:
            {"seconds", "cpu_seconds", "sentences", "tokens": (B, length) output ids}.

        Raises:
            RuntimeError: when an engine did not produce exactly `length` tokens per sentence.
        """
        src_t = self._tensor(src)
        self.model.eval()
        tokens, wall, cpu = _timed(lambda: self._search(src_t, length, beam_size, cache))
        if any(len(row) != length or EOS_ID in row for row in tokens):
            raise RuntimeError(f"{self.name}: an output does not have {length} tokens without eos")
        return {"seconds": wall, "cpu_seconds": cpu, "sentences": len(src), "tokens": tokens}

    def _search(self, src: torch.Tensor, length: int, beam_size: int, cache: bool):
        if self.name == "hf":
            out = self.model.generate(
                input_ids=src,
                attention_mask=src.ne(PAD_ID),
                max_new_tokens=length,
                min_new_tokens=length,  # HF's logits processor that sets the eos score to -inf
                num_beams=beam_size,
                do_sample=False,
            )  # (B, 1 + length), decoder start token first
            return out[:, 1:].tolist()
        if self.name != "ours":
            raise ValueError(f"engine {self.name!r} has no decoder in this benchmark")
        model = EosSuppressed(self.model)
        # Weights reordered for oneDNN once per search, inside the timed call; rows per step =
        # sentences x beams (no-op for plain layers and below MIN_PACKING_ROWS rows).
        with prepacked_weights(model, rows=src.shape[0] * beam_size):
            if beam_size == 1:
                hyps = greedy_search(model, src, max_len_a=0.0, max_len_b=length, use_cache=cache)
            else:
                nbest = beam_search(
                    model,
                    src,
                    beam_size=beam_size,
                    max_len_a=0.0,
                    max_len_b=length,
                    use_cache=cache,
                )
                hyps = [h[0] for h in nbest]
        return [h.tokens for h in hyps]
