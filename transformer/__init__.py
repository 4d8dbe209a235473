"""A readable PyTorch reference implementation of the Transformer (Vaswani et al., 2017).

from transformer import ModelConfig, Transformer, Translator, load_checkpoint
"""

from transformer.checkpoint import load_checkpoint
from transformer.config import Config, DataConfig, DecodeConfig, ModelConfig, TrainConfig
from transformer.model import Transformer
from transformer.translator import Translator

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
