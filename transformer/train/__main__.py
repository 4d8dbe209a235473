"""`python -m transformer.train` (and `torchrun -m transformer.train`, `make demo`'s training
step): `transformer-train`, through the console scripts' entry point (`transformer/cli/launch.py`):
the OpenMP wait policy is set before torch loads, and a Ctrl-C while it loads ends in one line."""

import sys

from transformer.cli.launch import train

if __name__ == "__main__":
    sys.exit(train())
