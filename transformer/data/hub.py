"""The Hugging Face Hub's retry warnings, kept out of a download's output.

Offline, `datasets.load_dataset` retries each request five times over some 25 seconds, and
`huggingface_hub` logs two lines per try ("... thrown while requesting HEAD ...", "Retrying in
4s [Retry 3/5]") before the corpus loaders (`hf_corpus.load_hf`, `multi30k.find_multi30k`) end
in their one-line message naming the local-file alternative. The retries stay (a network that
drops a request, and the fallback to a dataset already in the local cache, still work); only
their warnings are held back. Errors are still logged.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

HUB_LOGGER = "huggingface_hub"


@contextlib.contextmanager
def quiet_hub_retries() -> Iterator[None]:
    """Within the block, `huggingface_hub` logs errors only, not its retry warnings.

    Source: `huggingface_hub.utils._http.http_backoff` logs the retries as warnings on a child
    of the `huggingface_hub` logger, whose level the children inherit (Python's `logging`).
    """
    logger = logging.getLogger(HUB_LOGGER)
    level = logger.level
    logger.setLevel(max(logging.ERROR, level))
    try:
        yield
    finally:
        logger.setLevel(level)
