"""CPU speed-ups applied from outside the model (the model itself is plain `torch.nn`).

- `onednn.py`: float32 matrix products by oneDNN (a swap of the linear layers after the model
  is built) and weights reordered once per search for decoding.
"""
