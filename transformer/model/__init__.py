"""The Transformer of Figure 1 (Vaswani et al., 2017, section 3), read top to bottom:

- `config.py`: `ModelConfig`, the hyper-parameters (Table 3);
- `embeddings.py`: token embeddings scaled by sqrt(d_model) (3.4);
- `positional_encoding.py`: sinusoidal positions (3.5);
- `masking.py`: padding and causal masks (3.2.3);
- `attention.py`: scaled dot-product and multi-head attention (3.2, equation 1);
- `feed_forward.py`: the position-wise feed-forward network (3.3, equation 2);
- `encoder.py`, `decoder.py`: the two stacks (3.1);
- `cache.py`: keys and values kept between decoding steps;
- `transformer.py`: `Transformer`, which puts them together (`encode`, `decode`, `forward`).

Only torch and the standard library are imported here: no training, data or CPU plumbing.
"""

from transformer.model.config import ModelConfig
from transformer.model.transformer import Transformer

__all__ = ["ModelConfig", "Transformer"]
