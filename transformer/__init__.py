"""A readable PyTorch reference implementation of the Transformer (Vaswani et al., 2017).

    from transformer import ModelConfig, Transformer, Translator, load_checkpoint

The package, by concern (each folder's `__init__.py` lists its files):

- `model/`: Figure 1 of the paper and nothing else (plain `torch.nn`);
- `data/`: corpora, SentencePiece tokenizer, encoded cache, token-based batches;
- `train/`: the training loop of section 5 and everything it keeps (checkpoints, metrics);
- `decode/`: greedy and beam search (section 6.1) and `Translator`;
- `evaluate/`: BLEU (sacreBLEU and the paper's tokenized BLEU) and attention maps;
- `cli/`: the console scripts (`transformer-train`, `-translate`, `-evaluate`, ...);
- `cpu/`: CPU speed-ups applied from outside the model (oneDNN);
- `config.py` (the YAML config), `checkpoint.py` (the checkpoint file), `device.py`,
  `atomic.py` (files written whole or not at all); `__main__.py`: `python -m transformer
  <command>`, the console script `transformer-<command>`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformer.checkpoint import load_checkpoint
    from transformer.config import Config, DataConfig, DecodeConfig, ModelConfig, TrainConfig
    from transformer.decode.translator import Translator
    from transformer.model import Transformer

# The public names and the modules that define them, imported on first use (PEP 562): importing
# the package alone does not load torch, so a console script can set torch's OpenMP wait policy
# before torch starts (`transformer.cli.launch`).
_EXPORTS = {
    "Config": "transformer.config",
    "DataConfig": "transformer.config",
    "DecodeConfig": "transformer.config",
    "ModelConfig": "transformer.config",
    "TrainConfig": "transformer.config",
    "Transformer": "transformer.model",
    "Translator": "transformer.decode.translator",
    "load_checkpoint": "transformer.checkpoint",
}

__all__ = [
    "Config",
    "DataConfig",
    "DecodeConfig",
    "ModelConfig",
    "TrainConfig",
    "Transformer",
    "Translator",
    "load_checkpoint",
]


def __getattr__(name: str) -> object:
    """`transformer.<name>` for the public names: the defining module's attribute."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'transformer' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
