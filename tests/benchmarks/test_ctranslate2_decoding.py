"""benchmarks/ctranslate2_decoding.py: every engine decodes the same sentences; the table says
how fast, how well, and how often they agree with our decoder."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("ctranslate2")
pytest.importorskip("transformers")

from benchmarks import ctranslate2_decoding  # noqa: E402


def test_every_engine_search_and_thread_count_is_reported(
    tmp_path, capsys, make_search_model, synthetic_tokenizer, synthetic_sentences, write_checkpoint
):
    model = make_search_model(synthetic_tokenizer.vocab_size)
    with torch.no_grad():  # sharper outputs, as after training (see tests/cli/test_export.py)
        model.tgt_embed.weight.mul_(3.0)
    checkpoint = write_checkpoint(tmp_path / "model.pt", model, synthetic_tokenizer)
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("\n".join(synthetic_sentences(12, seed=1)) + "\n")
    ref.write_text("\n".join(synthetic_sentences(12, seed=2)) + "\n")
    argv = ["--checkpoint", str(checkpoint), "--src", str(src), "--ref", str(ref)]
    argv += ["--threads", "1", "--rounds", "2", "--json", str(tmp_path / "out.json")]
    assert ctranslate2_decoding.main(argv) == 0
    table = capsys.readouterr().out
    assert "| ours | greedy | 1 |" in table and "| huggingface generate | beam 4 | 1 |" in table
    rows = json.loads((tmp_path / "out.json").read_text())["rows"]
    engines = ["ours", "ctranslate2 float32", "ctranslate2 int8", "huggingface generate"]
    assert [(r["engine"], r["search"]) for r in rows] == [
        (engine, search) for search in ("greedy", "beam 4") for engine in engines
    ]
    for row in rows:
        assert row["sentences_per_second"] > 0 and row["min"] <= row["max"]
        assert 0 <= row["bleu"] <= 100
    by_name = {(r["engine"], r["search"]): r for r in rows}
    assert by_name[("ours", "greedy")]["speedup_vs_ours"] == 1.0
    # CTranslate2 float32 reproduces our searches; Hugging Face our greedy search.
    for key in [("ctranslate2 float32", "greedy"), ("ctranslate2 float32", "beam 4")]:
        assert by_name[key]["identical_to_ours"] == 12
    assert by_name[("huggingface generate", "greedy")]["identical_to_ours"] == 12
