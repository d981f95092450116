"""Reader connections reused within a process.

Recall runs two of its arms on their own connections (store.reader()) so they do not queue
behind the main one. Opening a connection costs several milliseconds (the file checks of
base.py, loading sqlite-vec, PRAGMAs): two per query was a large share of a warm `--batch`
query. A closed reader goes back to its store's pool and the next reader() takes it, with
its caches (the vector scans of vectors.py) intact; closing the store closes them all.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

R = TypeVar("R")


class ReaderPool(Generic[R]):
    """The idle reader connections of one store (Store.reader, Store.close)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[R] = []
        self.closed = False

    def take(self) -> R | None:
        """An idle reader, or None when there is none."""
        with self._lock:
            return self._idle.pop() if self._idle else None

    def give_back(self, reader: R) -> bool:
        """Keep a reader its user closed for the next reader(); False once the store that
        owns the pool is closed (the reader must then really close)."""
        with self._lock:
            if self.closed:
                return False
            self._idle.append(reader)
            return True

    def close(self) -> list[R]:
        """Close the pool: the idle readers, which the caller closes."""
        with self._lock:
            self.closed = True
            idle, self._idle = self._idle, []
        return idle
