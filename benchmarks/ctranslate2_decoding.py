"""Decode a test set with our decoder, CTranslate2 (float32, int8) and Hugging Face `generate`.

    python -m benchmarks.ctranslate2_decoding --checkpoint checkpoints/export_m30k/avg5.pt
    python benchmarks/ctranslate2_decoding.py --checkpoint CKPT --src test.en --ref test.de \\
        [--threads 1 2] [--rounds 2] [--limit 200] [--json out.json]

One trained checkpoint, exported with `transformer-export`'s code (`transformer/export/`), is
decoded by every engine from raw text to raw text (tokenizing, batching, searching,
detokenizing): our `Translator`, CTranslate2 float32 and int8 (under the options that reproduce
our searches, `transformer/export/ctranslate2_translate.py`) and the exported `MarianMTModel`'s
`generate` (float32; greedy is token-identical to ours, its beam search is Hugging Face's own).
Greedy and beam 4 (length penalty |Y|^0.6, CTranslate2's convention, our `power` style), on 1
and 2 threads. The engines alternate inside each round; the report gives sentences per second
(median and range over rounds), the speed-up over our decoder in the same setting, sacreBLEU,
how many outputs equal ours, and the share of the CPUs other processes used meanwhile.
Needs the `export` extra (`pip install -e ".[export]"`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as `python benchmarks/ctranslate2_decoding.py`: import from
    # the repo root, and take benchmarks/ off sys.path (its cuda.py would shadow NVIDIA's `cuda`)
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [str(_HERE.parent), *(p for p in sys.path if p != str(_HERE))]

import torch  # noqa: E402

from transformer.checkpoint import load_checkpoint  # noqa: E402
from transformer.data.corpus import read_lines  # noqa: E402
from transformer.decode.translator import Translator  # noqa: E402
from transformer.evaluate.bleu import corpus_scores  # noqa: E402
from transformer.export.ctranslate2 import export_ctranslate2  # noqa: E402
from transformer.export.ctranslate2_translate import translate_ids  # noqa: E402
from transformer.export.extra import import_extra  # noqa: E402
from transformer.export.huggingface import export_huggingface  # noqa: E402
from transformer.export.huggingface_parity import generate_ids, load_huggingface  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k"
ALPHA = 0.6
SEARCHES = (("greedy", 1), ("beam 4", 4))


def _machine_busy_seconds() -> float | None:
    """CPU seconds all processes have spent so far (/proc/stat), or None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    ticks = [int(x) for x in fields]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait


def engines(model, tokenizer, config, directory: Path, skip_hf: bool) -> dict:
    """name -> translate(texts, beam_size, threads) -> texts, every engine ready to run."""
    ctranslate2 = import_extra("ctranslate2")
    decode = config.decode
    limits = dict(max_len_a=decode.max_len_a, max_len_b=decode.max_len_b)
    translator = Translator(model, tokenizer)

    def ours(texts, beam_size, threads):
        return translator.translate(
            texts,
            beam_size=beam_size,
            greedy=beam_size == 1,
            length_penalty=ALPHA,
            length_penalty_style="power",
            max_tokens=decode.max_tokens,
            **limits,
        )

    def ctranslate2_engine(path: Path, compute_type: str):
        loaded = {}

        def run(texts, beam_size, threads):
            if threads not in loaded:
                loaded[threads] = ctranslate2.Translator(
                    str(path), compute_type=compute_type, intra_threads=threads
                )
            ids = translate_ids(
                loaded[threads],
                tokenizer,
                tokenizer.encode_batch(texts),
                beam_size,
                ALPHA,
                max_positions=model.config.max_positions,
                max_tokens=decode.max_tokens,
                **limits,
            )
            return tokenizer.decode_batch(ids)

        return run

    export_ctranslate2(model, tokenizer, directory / "float32")
    export_ctranslate2(model, tokenizer, directory / "int8", "int8")
    table = {
        "ours": ours,
        "ctranslate2 float32": ctranslate2_engine(directory / "float32", "float32"),
        "ctranslate2 int8": ctranslate2_engine(directory / "int8", "int8"),
    }
    if not skip_hf:
        export_huggingface(model, tokenizer, directory / "hf")
        marian, _ = load_huggingface(directory / "hf")

        def huggingface(texts, beam_size, threads):
            options = {"length_penalty": ALPHA} if beam_size > 1 else {}
            ids = generate_ids(
                marian,
                tokenizer.encode_batch(texts),
                num_beams=beam_size,
                max_positions=model.config.max_positions,
                **limits,
                **options,
            )
            return tokenizer.decode_batch(ids)

        table["huggingface generate"] = huggingface
    return table


def measure(table: dict, texts: list[str], threads_list, rounds: int) -> dict:
    """Run every engine, search and thread count `rounds` times, alternating the engines.

    Returns:
        {(engine, search, threads): {"seconds": [...], "others": [...], "outputs": texts}}.
    """
    results: dict = {}
    for round_index in range(rounds):
        names = list(table) if round_index % 2 == 0 else list(reversed(table))
        for threads in threads_list:
            torch.set_num_threads(threads)
            for search, beam_size in SEARCHES:
                for name in names:
                    table[name](texts[:4], beam_size, threads)  # warm-up (and model load)
                    busy, start = _machine_busy_seconds(), time.perf_counter()
                    own = time.process_time()
                    outputs = table[name](texts, beam_size, threads)
                    wall = time.perf_counter() - start
                    own, busy_after = time.process_time() - own, _machine_busy_seconds()
                    entry = results.setdefault(
                        (name, search, threads), {"seconds": [], "others": []}
                    )
                    entry["seconds"].append(wall)
                    if busy is not None and busy_after is not None:
                        capacity = wall * (os.cpu_count() or 1)
                        entry["others"].append(max(0.0, 100 * (busy_after - busy - own) / capacity))
                    entry["outputs"] = outputs
    return results


def report(results: dict, texts, references, target_lang: str) -> list[dict]:
    """One row per (engine, search, threads), with speed, BLEU and agreement with ours."""
    rows = []
    for (name, search, threads), entry in results.items():
        ours = results[("ours", search, threads)]
        speeds = [len(texts) / s for s in entry["seconds"]]
        our_speed = statistics.median(len(texts) / s for s in ours["seconds"])
        row = {
            "engine": name,
            "search": search,
            "threads": threads,
            "sentences_per_second": statistics.median(speeds),
            "min": min(speeds),
            "max": max(speeds),
            "speedup_vs_ours": statistics.median(speeds) / our_speed,
            "identical_to_ours": sum(
                a == b for a, b in zip(entry["outputs"], ours["outputs"], strict=True)
            ),
            "others_cpu_percent": statistics.median(entry["others"]) if entry["others"] else None,
        }
        if references is not None:
            row["bleu"] = corpus_scores(entry["outputs"], references, target_lang)["bleu"]
        rows.append(row)
    order = {name: i for i, name in enumerate(dict.fromkeys(key[0] for key in results))}
    searches = {search: i for i, (search, _) in enumerate(SEARCHES)}
    return sorted(rows, key=lambda r: (searches[r["search"]], r["threads"], order[r["engine"]]))


def format_table(rows: list[dict], sentences: int) -> str:
    """The report as a Markdown table."""
    lines = [
        f"| engine | search | threads | sentences/s (median, min-max) | vs ours | BLEU "
        f"| identical to ours (of {sentences}) | others' CPU % |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        bleu = f"{r['bleu']:.2f}" if "bleu" in r else "-"
        others = "-" if r["others_cpu_percent"] is None else f"{r['others_cpu_percent']:.0f}"
        lines.append(
            f"| {r['engine']} | {r['search']} | {r['threads']} | {r['sentences_per_second']:.1f} "
            f"({r['min']:.1f}-{r['max']:.1f}) | {r['speedup_vs_ours']:.2f}x | {bleu} "
            f"| {r['identical_to_ours']} | {others} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table (and write `--json`). Returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a trained checkpoint")
    parser.add_argument("--src", default=str(DATA / "test_2016_flickr.en"))
    parser.add_argument("--ref", default=str(DATA / "test_2016_flickr.de"))
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--limit", type=int, help="only the first N sentences")
    parser.add_argument("--skip-hf", action="store_true", help="leave out Hugging Face")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    model, tokenizer, config = load_checkpoint(args.checkpoint)
    model.float()
    lines = read_lines(args.src)[: args.limit]
    kept = [i for i, text in enumerate(lines) if tokenizer.encode(text)]  # "" is "" for all
    texts = [lines[i] for i in kept]
    references = [read_lines(args.ref)[i] for i in kept] if args.ref else None
    torch.set_flush_denormal(True)
    with tempfile.TemporaryDirectory() as directory:
        table = engines(model, tokenizer, config, Path(directory), args.skip_hf)
        load_before = os.getloadavg()
        results = measure(table, texts, args.threads, args.rounds)
    rows = report(results, texts, references, config.data.target_lang)
    print(format_table(rows, len(texts)))
    print(f"load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}")
    if args.json:
        summary = {
            "checkpoint": args.checkpoint,
            "sentences": len(texts),
            "rows": rows,
            "rounds": args.rounds,
            "load_average": [load_before[0], os.getloadavg()[0]],
        }
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
