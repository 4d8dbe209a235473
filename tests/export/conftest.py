"""Fixtures of the export tests: one model trained on Multi30k (configs/tiny.yaml), per session.

Parity is checked on a trained model, not only on random weights: training makes the output
distributions peaked, as they are in use, where random weights make near-ties common.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TINY_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"


@pytest.fixture(scope="session")
def trained_checkpoint(tmp_path_factory, shared_data):
    """configs/tiny.yaml (2 + 2 layers, d_model 64, 1000 BPE pieces) trained for 200 updates on
    Multi30k EN->DE, one thread, no validation (seconds): the path of checkpoint_last.pt."""
    from transformer.cli.train import main

    run_dir = tmp_path_factory.mktemp("export") / "run"
    argv = ["--config", str(TINY_CONFIG), f"train.output_dir={run_dir}"]
    argv += ["train.max_steps=200", "data.valid=null", "train.num_threads=1"]
    argv += ["train.save_interval_steps=200", "train.keep_last=1"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
        assert main(argv) == 0
    return run_dir / "checkpoint_last.pt"


@pytest.fixture(scope="session")
def trained(trained_checkpoint):
    """(model, tokenizer, config) of `trained_checkpoint`: float32, eval mode, CPU."""
    from transformer.checkpoint import load_checkpoint

    return load_checkpoint(trained_checkpoint)


@pytest.fixture(scope="session")
def test_sentences(shared_data):
    """`test_sentences(n, lang="en")` -> the first n lines of Multi30k test_2016_flickr."""

    def lines(n: int, lang: str = "en") -> list[str]:
        path = shared_data / "multi30k" / f"test_2016_flickr.{lang}"
        return path.read_text(encoding="utf-8").splitlines()[:n]

    return lines
