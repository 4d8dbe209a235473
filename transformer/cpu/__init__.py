"""CPU speed-ups applied from outside the model (the model itself is plain `torch.nn`).

- `onednn.py`: float32 matrix products by oneDNN (a swap of the linear layers after the model
  is built) and weights reordered once per search for decoding.
- `dropout.py`: dropout masks drawn with `torch.rand` instead of `bernoulli_` (a swap of the
  dropout layers after the model is built, for CPU training);
- `malloc.py`: glibc's malloc keeps the memory of freed tensors for the next training update
  instead of giving it back to the kernel (a setting of the process, for CPU training);
- `primitive_cache.py`: oneDNN keeps the compiled matrix products of every batch shape of an
  epoch instead of its last 1024 (a setting of the process, for CPU training);
- `processes.py`: how many one-thread training processes a CPU job runs (`make demo`).
"""
