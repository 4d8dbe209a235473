"""A readable PyTorch reference implementation of the Transformer (Vaswani et al., 2017)."""

from transformer.config import Config, DataConfig, DecodeConfig, ModelConfig, TrainConfig
from transformer.model import Transformer

__all__ = ["Config", "DataConfig", "DecodeConfig", "ModelConfig", "TrainConfig", "Transformer"]
