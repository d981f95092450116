"""Local models: the embedder, the optional cross-encoder reranker, GGUF conversion.

Kept import-light: names are re-exported lazily so `from memcli.models import ModelError`
does not load llama.cpp (which costs start-up time for CLI commands that never embed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memcli.errors import MemError


class ModelError(MemError):
    """A model file is missing, unreadable or of the wrong kind. str() is one line for users."""


_LAZY = {
    "Embedder": "memcli.models.embedder",
    "load_embedder": "memcli.models.embedder",
    "Reranker": "memcli.models.reranker",
    "load_reranker": "memcli.models.reranker",
    "convert_bert_folder": "memcli.models.convert",
    "default_embedder_path": "memcli.models.convert",
    "build_test_reranker": "memcli.models.convert",
}

__all__ = [
    "ModelError",
    "Embedder",
    "load_embedder",
    "Reranker",
    "load_reranker",
    "convert_bert_folder",
    "default_embedder_path",
    "build_test_reranker",
]

if TYPE_CHECKING:
    from memcli.models.convert import (
        build_test_reranker,
        convert_bert_folder,
        default_embedder_path,
    )
    from memcli.models.embedder import Embedder
    from memcli.models.load import load_embedder
    from memcli.models.reranker import Reranker, load_reranker


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memcli.models' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
