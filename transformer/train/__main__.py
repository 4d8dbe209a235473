"""`python -m transformer.train` (and `torchrun -m transformer.train`): `transformer-train`."""

import sys

from transformer.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
