"""A vector cache on disk for ``mem bench`` only (its own SQLite file, so its SQL lives here
with the store's): repeated runs do not embed the same text again.

An ablation of a ranking setting re-retains every case of a dataset. On LongMemEval S that is
~18k user turns per run, and embedding them is most of a run's time (MiniLM ~25 ms a turn on
2 shared cores, e5 twice that). The vectors depend on nothing but the model's weights, the
kind of input (a stored passage or a query: e5 prefixes them differently) and the exact text,
so they are kept in one SQLite file per model in the user cache folder
(``<cache>/bench-vectors/<fingerprint>.sqlite``), keyed by the sha256 of the kind and the
text. A model with another fingerprint gets another file, so a stale vector can never be
served.

Recall and retain never use this: it is bench-only (``mem bench --no-vector-cache`` turns it
off), and it holds the benchmark's own texts, never a user's store.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apsw
import numpy as np

__all__ = ["DiskVectorCache", "cached", "default_cache_folder"]

# The kinds of input a model prepares differently (models/embedder.py TextRules).
PASSAGE = b"p"
QUERY = b"q"


def default_cache_folder() -> Path:
    """Where bench vectors are kept: beside the converted models in the user cache folder."""
    from memcli.paths import cache_dir

    return cache_dir() / "bench-vectors"


def _key(kind: bytes, text: str) -> bytes:
    return hashlib.sha256(kind + b"\0" + text.encode("utf-8", "surrogatepass")).digest()


class DiskVectorCache:
    """Wraps an embedder: ``embed`` (passages) and ``embed_query``/``embed_queries`` read the
    vectors of texts seen before from disk and embed only the rest. Everything else (name,
    fingerprint, dim, rules) is the wrapped model's.

    The wrapped model must have a ``fingerprint`` (the sha256 of its weights); without one
    nothing could tell two models apart, so the cache refuses it (ValueError)."""

    def __init__(self, inner: Any, folder: Path | None = None) -> None:
        fingerprint = getattr(inner, "fingerprint", None)
        if not fingerprint:
            raise ValueError("a vector cache needs a model with a fingerprint")
        self.inner = inner
        self.dim = int(inner.dim)
        folder = Path(folder) if folder is not None else default_cache_folder()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = folder / f"{fingerprint}.sqlite"
        if not self.path.exists():  # readable by its owner only, as mem's stores are
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        self._conn = apsw.Connection(str(self.path))
        self._conn.set_busy_timeout(30_000)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS vectors(key BLOB PRIMARY KEY, vec BLOB NOT NULL) "
            "WITHOUT ROWID"
        )
        self.hits = 0
        self.misses = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def close(self) -> None:
        self._conn.close()

    def _lookup(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        width = self.dim * 4
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            marks = ",".join("?" * len(part))
            for key, blob in self._conn.execute(
                f"SELECT key, vec FROM vectors WHERE key IN ({marks})", part
            ):
                if len(blob) == width:
                    found[key] = np.frombuffer(blob, dtype="<f4")
        return found

    def _vectors(self, kind: bytes, texts: Sequence[str], compute: Any) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        keys = [_key(kind, t) for t in texts]
        found = self._lookup(list(dict.fromkeys(keys)))
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in found))
        if missing:
            computed = np.asarray(compute(missing), dtype=np.float32)
            rows = [(_key(kind, t), v.astype("<f4").tobytes()) for t, v in zip(missing, computed)]
            with self._conn:
                self._conn.executemany("INSERT OR REPLACE INTO vectors VALUES(?, ?)", rows)
            for (key, _), vec in zip(rows, computed):
                found[key] = vec
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        for i, key in enumerate(keys):
            out[i] = found[key]
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectors(PASSAGE, texts, self.inner.embed)

    embed_passages = embed

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        inner_queries = getattr(self.inner, "embed_queries", None)
        if inner_queries is None:
            one = getattr(self.inner, "embed_query", None)
            if one is None:  # a model with one rule for everything
                return self._vectors(QUERY, texts, self.inner.embed)
            return self._vectors(QUERY, texts, lambda ts: [one(t) for t in ts])
        return self._vectors(QUERY, texts, inner_queries)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]


def cached(embedder: Any, folder: Path | None = None) -> Any:
    """The embedder behind a disk cache, or as it is (with a note on stderr) when the cache
    folder cannot be written: a benchmark still runs, only slower."""
    import sys

    try:
        return DiskVectorCache(embedder, folder)
    except (OSError, apsw.Error, ValueError) as exc:
        print(f"mem bench: no vector cache ({exc}); embedding everything", file=sys.stderr)
        return embedder
