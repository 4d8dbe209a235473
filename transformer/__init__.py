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
  `atomic.py` (files written whole or not at all).
"""

from transformer.checkpoint import load_checkpoint
from transformer.config import Config, DataConfig, DecodeConfig, ModelConfig, TrainConfig
from transformer.decode.translator import Translator
from transformer.model import Transformer

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
