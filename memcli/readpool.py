"""Read-only connections for a long-lived Memory: reads in parallel, beside one writer.

A `Memory` served one call at a time: one connection and one lock for everything, so a 5 MB
retain (minutes of embedding) held every recall of an MCP server until it was done. SQLite
in WAL mode lets any number of readers run beside one writer, each reading the last commit,
so reads (recall, list, show, banks, stats) take a read-only Store of their own from this
pool, while writes keep the Memory's one writing connection, one at a time.

Each Store is held by one call at a time and goes back to the pool afterwards (its caches,
the bank's vector scan, kept warm). At most `size` are open; a read beyond that waits for
one. A Store whose file was replaced or deleted at the path since it opened (a backup
restored over it) is dropped without the checkpoint a close does (Store.abandon): the -wal
and -shm at the path now belong to the new file. Nothing here opens the store file outside
SQLite (issue 30: closing any descriptor of it drops the locks the process's connections
hold): the path's identity is read with stat().
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memcli.storeurl import StoreURL

# How many read-only connections a Memory keeps at most. Two cores are common where mem
# runs; more readers than cores only queue on the CPU, and each keeps its own page cache and
# vector scan.
DEFAULT_READERS = 4
# How long a read waits for a pooled connection before it opens one of its own.
SLOT_WAIT_SECONDS = 5.0


class ReadPool:
    """Read-only Stores of one file, each held by one caller at a time (see the module)."""

    def __init__(self, path: Path | StoreURL, size: int, upgrade: Callable[[], None]) -> None:
        # upgrade(): bring an older store's schema up to date through the writer, once, so
        # that read-only connections read the schema this mem knows.
        self.path = path
        self._upgrade = upgrade
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        self._generation = 0  # bumped by close(): Stores out at that time are not kept

    @contextmanager
    def reader(self) -> Iterator[Any]:
        """A read-only Store of the file, for this caller alone until the block ends. When
        every slot stays taken for SLOT_WAIT_SECONDS (readers held by iterators nobody
        finished), the caller gets a Store of its own, closed after: a read never waits
        forever."""
        slot = self._slots.acquire(timeout=SLOT_WAIT_SECONDS)
        try:
            store = self._take()
            kept = False
            try:
                yield store
                kept = slot
            finally:
                self._give_back(store, kept)
        finally:
            if slot:
                self._slots.release()

    def _take(self) -> Any:
        from memcli.paths import file_identity

        identity = file_identity(self.path)
        while True:
            with self._lock:
                store = self._idle.pop() if self._idle else None
            if store is None:
                return self._open(identity)
            if store._mem_identity == identity:
                return store
            store.abandon()  # the file at the path is another one now

    def _open(self, identity: Any) -> Any:
        from memcli.paths import file_identity
        from memcli.store.location import open_store

        store = open_store(self.path, create=False, readonly=True)
        if store.upgradable():
            store.close()
            self._upgrade()
            store = open_store(self.path, create=False, readonly=True)
            identity = file_identity(self.path)
        store._mem_identity = identity
        store._mem_generation = self._generation
        return store

    def _give_back(self, store: Any, kept: bool) -> None:
        from memcli.paths import file_identity

        if file_identity(self.path) != store._mem_identity:
            store.abandon()
            return
        with self._lock:
            # A reader that holds the store alone (it read on a full disk) is never kept: it
            # would lock every other process out while it waits idle.
            if (
                kept
                and store._mem_generation == self._generation
                and not store.in_transaction()
                and not store.holds_alone()
            ):
                self._idle.append(store)
                return
        store.close()

    def close(self) -> None:
        """Close every idle Store; those still out close when they come back."""
        from memcli.paths import file_identity

        with self._lock:
            idle, self._idle = self._idle, []
            self._generation += 1
        same = file_identity(self.path)
        for store in idle:
            if store._mem_identity == same:
                store.close()
            else:
                store.abandon()
