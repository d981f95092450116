"""mem: a memory for people and AI agents. `from memcli import Memory` (memcli/memory.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["Budget", "FactType", "MemError", "Memory", "TagsMatch", "__version__"]

if TYPE_CHECKING:
    from memcli.enums import Budget, FactType, TagsMatch
    from memcli.errors import MemError
    from memcli.memory import Memory

_LAZY = {
    "Memory": "memcli.memory",
    "MemError": "memcli.errors",
    "Budget": "memcli.enums",
    "FactType": "memcli.enums",
    "TagsMatch": "memcli.enums",
}


def __getattr__(name: str) -> Any:
    # Imported on first use: `mem --help` and every CLI start import this package, and
    # must not pay for what they do not use.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memcli' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
