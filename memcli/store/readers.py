"""Reader connections reused within a process.

Recall runs two of its arms on their own connections (store.reader()) so they do not queue
behind the main one. Opening a connection costs several milliseconds (the file checks of
base.py, loading sqlite-vec, PRAGMAs): two per query was a large share of a warm `--batch`
query. A closed reader goes back to its store's pool and the next reader() takes it, with
its caches (the vector scans of vectors.py) intact; closing the store closes them all.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()


class ReaderPoolMixin:
    conn: Any

    def reader(self) -> Any:
        """A connection to the same file for another thread: a pooled one when there is one."""
        pool = self.__dict__.setdefault("_reader_pool", [])
        with _lock:
            if pool:
                return pool.pop()
        reader = super().reader()  # type: ignore[misc]
        reader._pool_owner = self
        return reader

    def close(self) -> None:
        owner = self.__dict__.get("_pool_owner")
        if owner is not None and not owner.__dict__.get("_closed"):
            if not self.conn.in_transaction:
                with _lock:
                    if not owner.__dict__.get("_closed"):
                        owner.__dict__.setdefault("_reader_pool", []).append(self)
                        return
        self.__dict__["_closed"] = True
        with _lock:
            pooled = self.__dict__.pop("_reader_pool", [])
        for reader in pooled:
            reader.__dict__.pop("_pool_owner", None)
            reader.close()
        super().close()  # type: ignore[misc]
