"""Which embedder a spec names, and loading it once per process: the built-in models by name
("minilm", "e5", their full names; converted into the cache on first use) or a GGUF path.
Above embedder.py (the model on llama.cpp) and e5.py / e5_query.py (the e5 files and its
query road), so none of them imports this.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from memcli.models.embedder import Embedder

# Built-in embedders by name (and short aliases): what `--embedder NAME` and a bank's recorded
# name resolve to. Anything else is a path to a GGUF file.
BUILTIN_ALIASES = {
    "minilm": "all-MiniLM-L6-v2",
    "all-minilm-l6-v2": "all-MiniLM-L6-v2",
    "e5": "multilingual-e5-small",
    "multilingual-e5-small": "multilingual-e5-small",
}


def builtin_name(spec: str) -> str | None:
    """The built-in model a name means ("e5" -> multilingual-e5-small), None for a path."""
    return BUILTIN_ALIASES.get(spec.strip().lower())


def spec_builtin(spec: str | Path | None) -> str | None:
    """The built-in model an embedder spec means (None: the default), or None for a path."""
    if spec is None:
        return "all-MiniLM-L6-v2"
    return builtin_name(spec) if isinstance(spec, str) else None


def builtin_path(name: str) -> Path:
    if name == "multilingual-e5-small":
        from memcli.models.e5 import e5_embedder_path

        return e5_embedder_path()
    from memcli.models.convert import default_embedder_path

    return default_embedder_path()


_cache: dict[Path, Any] = {}
_cache_lock = threading.Lock()
# One lock per spec, held while it resolves (converting a built-in the first time) and loads,
# so a preload and the load that needs it do the work once, and another spec never waits.
_spec_locks: dict[str, threading.Lock] = {}


def resolve_embedder_path(spec: str | Path | None, *, convert: bool = True) -> Path:
    """A GGUF path for an embedder spec: None (the default MiniLM), a built-in name or alias
    ("e5", "minilm", "multilingual-e5-small"), or a path. convert=False (`mem doctor`, which
    never writes): where a built-in's converted file is, without converting it, checking
    it or recording a hash (it may not exist yet)."""
    name = "all-MiniLM-L6-v2" if spec is None else None
    if isinstance(spec, str):
        name = builtin_name(spec)
    if name is None:
        return Path(spec).expanduser()  # type: ignore[arg-type]
    return builtin_path(name) if convert else converted_path(name)


def converted_path(name: str) -> Path:
    """Where a built-in embedder's converted GGUF is kept in the cache (named by the pinned
    hash of its source)."""
    from memcli.paths import cache_dir

    if name == "multilingual-e5-small":
        from memcli.models.e5 import e5_filename

        return cache_dir() / "models" / e5_filename()
    from memcli.models.convert import default_embedder_filename

    return cache_dir() / "models" / default_embedder_filename()


def load_embedder(path: str | Path | None = None) -> Embedder:
    """The embedder for path or name (None: mem's default for a new bank), loaded once per
    process."""
    # "e5", "multilingual-e5-small" and an alias in other case are one spec; None the default.
    spec_key = spec_builtin(path) or str(path)
    with _cache_lock:
        spec_lock = _spec_locks.setdefault(spec_key, threading.Lock())
    with spec_lock:
        if spec_key == "multilingual-e5-small":
            # Queries by the road that skips llama.cpp's 250k-piece tokenizer (e5_query.py).
            from memcli.models.e5_query import E5Embedder, e5_query_files

            files = e5_query_files()
            key = files[0].resolve()
            with _cache_lock:
                emb = _cache.get(key)
            if emb is None:
                emb = E5Embedder(*files)
                with _cache_lock:
                    emb = _cache.setdefault(key, emb)
            return emb
        key = resolve_embedder_path(path).resolve()
        with _cache_lock:
            emb = _cache.get(key)
        if emb is None:
            emb = Embedder(key)
            with _cache_lock:
                emb = _cache.setdefault(key, emb)
        return emb


def converted(name: str) -> bool:
    """Whether the cache holds a converted GGUF of this built-in model (any source hash)."""
    from memcli.paths import cache_dir

    return any((cache_dir() / "models").glob(f"{name}-*.gguf"))
