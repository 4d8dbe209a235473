"""oneDNN keeps the compiled matrix products of every batch shape: a setting for CPU training.

On an x86-64 CPU, PyTorch computes bfloat16 matrix products (the `Linear` layers and the
attention products of a bf16-autocast training step) and `OneDNNLinear`'s float32 ones
(`cpu/onednn.py`) with oneDNN. oneDNN builds one *primitive* per problem shape and compiles
its kernels to machine code when it builds it (on CPUs with AMX: brgemm kernels, each in a
mapping of its own). It keeps the last 1024 primitives in its primitive cache and rebuilds
any other on its next use (oneDNN's documentation, "Primitive Cache";
`ONEDNN_PRIMITIVE_CACHE_CAPACITY`). Token-based batches (`data/batching.py`) change shape from
one batch to the next: the rows of a product are the batch's tokens, and one micro-batch needs
a few dozen products (forward and backward, encoder and decoder). A Multi30k epoch of
`configs/multi30k.yaml` asks for about 2300 distinct primitives, and the next epoch asks for
the same ones again. With room for 1024 of them, every update compiles most of its products
anew, and the kernel's time goes into mapping and faulting in fresh code pages (BENCHMARKS.md,
"CPU training: kernel time").

`keep_compiled_products()` raises the capacity to `PRIMITIVE_CACHE_CAPACITY` for this process
unless the environment already sets it (`ONEDNN_PRIMITIVE_CACHE_CAPACITY`, or the older
`DNNL_PRIMITIVE_CACHE_CAPACITY`). oneDNN reads the variable once, when the process builds its
first primitive, so the trainer calls it before its first tensor product. A process that has
already built one keeps its cache as it is. The price is memory: the compiled code of the
kept primitives stays in the process.
"""

from __future__ import annotations

import os

# Room for about 3.5 epochs' worth of the demo's distinct primitives (about 2300 per epoch):
# a longer max_len or larger batches have more shapes.
PRIMITIVE_CACHE_CAPACITY = 8192

CAPACITY_VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "DNNL_PRIMITIVE_CACHE_CAPACITY")


def keep_compiled_products(capacity: int = PRIMITIVE_CACHE_CAPACITY) -> bool:
    """Make oneDNN keep `capacity` compiled primitives in this process (see the module docstring).

    Args:
        capacity: Primitives oneDNN keeps (its default is 1024); at least 1.

    Returns:
        True when this call set the capacity; False when the environment already sets it (the
        user's choice stands).

    Raises:
        ValueError: `capacity` below 1.
    """
    if capacity < 1:
        raise ValueError(f"capacity ({capacity}) must be at least 1")
    if any(name in os.environ for name in CAPACITY_VARIABLES):
        return False
    os.environ[CAPACITY_VARIABLES[0]] = str(capacity)
    return True
