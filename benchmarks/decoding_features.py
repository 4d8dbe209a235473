"""Decoding features of issue #16, timed: sampling and scoring against greedy, streaming memory.

    python benchmarks/decoding_features.py [--checkpoint ckpt.pt] [--threads 2] [--rounds 3]
    python -m benchmarks.decoding_features --stream-lines 10000 100000

1. Throughput at the same batch size. The first `--sentences` lines of Multi30k's
   test_2016_flickr are cut into batches of `--batch-size` sentences (in length order, the same
   batches for every mode) and decoded by greedy search, sampling (plain; temperature 0.8 with
   top-k 50; top-p 0.9) and beam search (4 beams), and scored (`score_batch` of the greedy
   outputs, one teacher-forced pass). Every output has exactly `--length` tokens: eos is
   banned during the searches (the benchmark's `EosSuppressed`, as in `benchmarks/engines.py`)
   and `max_len_a = 0, max_len_b = length`, so each mode does the same number of steps and the
   ratios measure the per-step cost of each feature. The modes take turns batch by batch, for
   `--rounds` rounds after a warm-up one; a mode's time is the sum over batches of its best
   round (robust on a shared machine), reported as sentences/s and as a ratio to greedy, with
   the median over rounds and each round's seconds. The model is `--checkpoint`'s, else a
   random model of `configs/multi30k.yaml`'s size (d_model 256, 3 + 3 layers, 8000 BPE pieces
   trained on Multi30k; `--vocab-size` widens its output layer, e.g. to the paper's 32000,
   the source ids staying those of the 8000 pieces). Speed does not depend on the weights,
   but for top-p's: a random model's distributions are nearly flat, top-p's worst case (its
   nucleus is most of the vocabulary). The "(peaked)" modes multiply the logits so
   that their standard deviation is 8 (a stand-in for a trained model's peaked distributions,
   not measured on one here) and time greedy search and top-p on that.
2. Streaming memory. `transformer-translate --greedy` (a small random model, outputs of at
   most 2 tokens) reads files of `--stream-lines` lines (Multi30k sentences repeated) from
   stdin and writes stdout to /dev/null, each in a fresh process; its peak RSS (VmHWM, which
   the process reports at exit) is reported per file length: flat memory means the same peak
   for every length. The largest file is run once more as a single chunk (`--buffer-size` =
   its length), which holds the whole input as the command did before streaming: the
   difference is what streaming saves.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import from the repo root, not benchmarks/
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [str(_HERE.parent), *(p for p in sys.path if p != str(_HERE))]

import torch  # noqa: E402

from benchmarks.engines import EosSuppressed  # noqa: E402
from transformer.checkpoint import FORMAT_VERSION, load_checkpoint, save_checkpoint  # noqa: E402
from transformer.config import Config, config_to_dict, load_config  # noqa: E402
from transformer.cpu.onednn import use_onednn  # noqa: E402
from transformer.data.corpus import read_lines  # noqa: E402
from transformer.data.tokenizer import Tokenizer  # noqa: E402
from transformer.decode.batched import inference  # noqa: E402
from transformer.decode.beam_search import beam_search  # noqa: E402
from transformer.decode.greedy import greedy_search  # noqa: E402
from transformer.decode.sampling import sample_search  # noqa: E402
from transformer.decode.scoring import padded, score_batch  # noqa: E402
from transformer.model import ModelConfig, Transformer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# Runs transformer-translate and writes its own peak RSS (VmHWM) at exit. The kernel's
# ru_maxrss of a child also counts the parent's pages between fork and exec (this process
# holds the Multi30k model), so the child reports the high-water mark of its own memory.
PEAK_RSS_WRAPPER = """
import atexit, runpy, sys
def report(path=sys.argv[1]):
    with open("/proc/self/status") as status, open(path, "w") as out:
        out.write(next(line for line in status if line.startswith("VmHWM")))
atexit.register(report)
sys.argv = ["transformer-translate", *sys.argv[2:]]
runpy.run_module("transformer.cli.translate", run_name="__main__")
"""


class Peaked(EosSuppressed):
    """`EosSuppressed` with its logits multiplied by `factor`: a random model's next-token
    distribution is nearly flat, a trained model's is peaked, and top-p's cost depends on it
    (the nucleus of a flat distribution is most of the vocabulary)."""

    def __init__(self, model: Transformer, factor: float) -> None:
        super().__init__(model)
        self.factor = factor

    def decode(self, *args, **kwargs):
        return super().decode(*args, **kwargs) * self.factor


def _data_dir() -> Path:
    return Path(os.environ.get("TRANSFORMER_DATA_DIR", REPO.parent / "shared" / "data"))


def _model(args) -> tuple[Transformer, Tokenizer]:
    """The checkpoint's model, or a random model of the Multi30k config's size."""
    if args.checkpoint:
        model, tokenizer, _ = load_checkpoint(args.checkpoint)
        return model.float().eval(), tokenizer
    multi30k = _data_dir() / "multi30k"
    texts = read_lines(multi30k / "train.en") + read_lines(multi30k / "train.de")
    tokenizer = Tokenizer(Tokenizer.train(texts, 8000))
    section = load_config(REPO / "configs" / "multi30k.yaml").model
    vocab_size = args.vocab_size or tokenizer.vocab_size  # the searches read ids only
    config = dataclasses.replace(section, vocab_size=vocab_size, dropout=0.0)
    torch.manual_seed(0)
    return Transformer(config).eval(), tokenizer


def throughput(args) -> dict:
    """Sentences/s of each mode on the same batches (see the module docstring, 1)."""
    model, tokenizer = _model(args)
    sources = read_lines(_data_dir() / "multi30k" / "test_2016_flickr.en")[: args.sentences]
    ids = sorted(tokenizer.encode_batch(sources), key=len, reverse=True)
    batches = [
        padded(ids[i : i + args.batch_size], 0, torch.device("cpu"))
        for i in range(0, len(ids), args.batch_size)
    ]
    searched = EosSuppressed(model)
    length = dict(max_len_a=0.0, max_len_b=args.length)
    targets = [[h.tokens for h in greedy_search(searched, src, **length)] for src in batches]
    seeds = list(range(args.batch_size))
    with torch.no_grad():  # scale the first step's logits to a standard deviation of 8
        memory = model.encode(batches[0])
        bos = torch.full((batches[0].shape[0], 1), model.config.bos_id)
        first = model.decode(bos, memory, batches[0].eq(0))
    peaked = Peaked(model, 8.0 / float(first.std()))
    modes = {
        "greedy": lambda src, _: greedy_search(searched, src, **length),
        "sampling": lambda src, _: sample_search(searched, src, seeds, **length),
        "sampling T=0.8 top-k=50": lambda src, _: sample_search(
            searched, src, seeds, temperature=0.8, top_k=50, **length
        ),
        "sampling top-p=0.9 (flat)": lambda src, _: sample_search(
            searched, src, seeds, top_p=0.9, **length
        ),
        "greedy (peaked)": lambda src, _: greedy_search(peaked, src, **length),
        "sampling top-p=0.9 (peaked)": lambda src, _: sample_search(
            peaked, src, seeds, top_p=0.9, **length
        ),
        "scoring": lambda src, tgt: score_batch(model, src, tgt),
        "beam 4": lambda src, _: beam_search(searched, src, beam_size=4, **length),
    }
    onednn = use_onednn("auto", torch.device("cpu"), "fp32")
    # times[name][round][batch]: the modes take turns batch by batch, so that a busy moment of
    # a shared machine hits them alike; the first round warms up
    times = {name: [[0.0] * len(batches) for _ in range(args.rounds)] for name in modes}
    with inference([model], onednn, rows=args.batch_size):
        for round_ in range(-1, args.rounds):
            for index, (src, tgt) in enumerate(zip(batches, targets, strict=True)):
                for name, run in modes.items():
                    start = time.perf_counter()
                    run(src, tgt)
                    if round_ >= 0:
                        times[name][round_][index] = time.perf_counter() - start
    best = {
        name: sum(min(r[i] for r in rounds) for i in range(len(batches)))
        for name, rounds in times.items()
    }
    report = {}
    for name, rounds in times.items():
        totals = [sum(r) for r in rounds]
        report[name] = {
            "sentences_per_second": round(len(ids) / best[name], 1),
            "relative_to_greedy": round(best["greedy"] / best[name], 3),
            "median_sentences_per_second": round(len(ids) / statistics.median(totals), 1),
            "round_seconds": [round(t, 2) for t in totals],
        }
    return report


def _small_checkpoint(path: Path) -> Path:
    """A small random model with a 1000-piece Multi30k tokenizer, in the checkpoint format."""
    multi30k = _data_dir() / "multi30k"
    tokenizer = Tokenizer(Tokenizer.train(read_lines(multi30k / "train.en")[:5000], 1000))
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size,
        d_model=64,
        d_ff=128,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        max_positions=256,
    )
    torch.manual_seed(0)
    model = Transformer(config)
    state = {
        "format_version": FORMAT_VERSION,
        "model": model.state_dict(),
        "model_config": dataclasses.asdict(config),
        "config": config_to_dict(Config(model=config)),
        "spm_model": tokenizer.src_model_bytes,
        "tgt_spm_model": None,
        "step": 0,
    }
    save_checkpoint(state, path)
    return path


def streaming_memory(args) -> dict:
    """Peak RSS of transformer-translate per input length (see the module docstring, 2)."""
    lines = read_lines(_data_dir() / "multi30k" / "test_2016_flickr.en")
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = _small_checkpoint(Path(tmp) / "small.pt")
        runs = [(count, None) for count in args.stream_lines]
        if args.stream_lines:  # the largest input again, as one chunk: what streaming saves
            runs.append((max(args.stream_lines), max(args.stream_lines)))
        for count, buffer_size in runs:
            source = Path(tmp) / f"in{count}.en"
            with open(source, "w", encoding="utf-8") as file:
                for index in range(count):
                    file.write(lines[index % len(lines)] + "\n")
            peak = Path(tmp) / "peak.txt"
            command = [
                sys.executable,
                "-c",
                PEAK_RSS_WRAPPER,
                str(peak),
                "--checkpoint",
                str(checkpoint),
                "--greedy",
                "--max-len-a",
                "0",
                "--max-len-b",
                "2",
                "--device",
                "cpu",
            ]
            if buffer_size is not None:
                command += ["--buffer-size", str(buffer_size)]
            env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), PYTHONPATH=str(REPO))
            start = time.perf_counter()
            errors = Path(tmp) / "stderr.txt"
            with (
                open(source, "rb") as stdin,
                open(os.devnull, "wb") as out,
                open(errors, "wb") as err,
            ):
                process = subprocess.Popen(command, stdin=stdin, stdout=out, stderr=err, env=env)
                status = process.wait()
            seconds = time.perf_counter() - start
            if status != 0:
                raise SystemExit(f"transformer-translate failed: {errors.read_text()}")
            key = (
                str(count) if buffer_size is None else f"{count} (one chunk: --buffer-size {count})"
            )
            report[key] = {
                "peak_rss_mib": round(int(peak.read_text().split()[1]) / 1024, 1),  # kB
                "seconds": round(seconds, 1),
                "lines_per_second": round(count / seconds, 1),
            }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="model to time (default: random, Multi30k size)")
    parser.add_argument(
        "--vocab-size",
        type=int,
        help="output vocabulary of the random model (default: its tokenizer's 8000 pieces; "
        "32000 for the paper's EN-DE size)",
    )
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--length", type=int, default=20, help="output tokens of every mode")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--stream-lines", type=int, nargs="*", default=[10000, 100000])
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args(argv)
    if args.vocab_size is not None and (args.checkpoint or args.vocab_size < 8000):
        parser.error("--vocab-size sizes the random model: at least 8000, without --checkpoint")
    torch.set_num_threads(args.threads)
    result = {"threads": args.threads, "batch_size": args.batch_size, "length": args.length}
    if not args.skip_throughput:
        result["throughput"] = throughput(args)
    if args.stream_lines:
        result["streaming"] = streaming_memory(args)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
