"""The optional `export` extra: CTranslate2 and Hugging Face `transformers`, imported on demand.

The export code imports these packages only when an export runs, so the rest of the package
(training, decoding) never needs them. A missing package is one line naming the extra to
install, never a traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# The packages of `pip install -e ".[export]"` (pyproject.toml), by import name.
EXPORT_PACKAGES = {
    "ctranslate2": "ctranslate2",
    "transformers": "transformers",
    "tokenizers": "tokenizers",
    "google.protobuf": "protobuf",
}


class MissingExtraError(ImportError):
    """A package of the `export` extra is not installed (the message says how to install it)."""


def import_extra(name: str) -> ModuleType:
    """Import a package of the `export` extra.

    Args:
        name: Import name, one of `EXPORT_PACKAGES` ("ctranslate2", "transformers", ...).

    Returns:
        The imported module.

    Raises:
        MissingExtraError: when it is not installed, in one line: `exporting needs the
            'export' extra (ctranslate2 is not installed): pip install -e ".[export]"`.
    """
    try:
        return importlib.import_module(name)
    except ImportError as error:
        package = EXPORT_PACKAGES.get(name, name)
        raise MissingExtraError(
            f"exporting needs the 'export' extra ({package} is not installed: {error}): "
            'pip install -e ".[export]"'
        ) from error
