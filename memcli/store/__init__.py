"""The one SQLite file and the one home of mem's SQL.

`Store` is a connection to one file, as parts that each own their SQL (one module each:
banks, documents, facts, entities, links, vectors, search, reembed, exchange, health) over
one StoreCore (core.py: the connection, transactions, snapshots, meta). Parts reach the
siblings they need explicitly, given to them when the Store builds them. What the rest of
mem may rely on is StoreProtocol (protocol.py); the SQLite classes are this package's own.
Opening never modifies a file that is not a mem store (base.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from memcli.store.banks import BanksPart, check_bank_name
from memcli.store.base import (
    StagingFile,
    build_schema,
    close_all_connections,
    is_database_error,
    is_sqlite_file,
    make_private_folders,
    remove_dead_staging,
    remove_staging,
    staging_leftovers,
    staging_path,
)
from memcli.store.core import StoreCore
from memcli.store.documents import DocumentsPart
from memcli.store.entities import EntitiesPart
from memcli.store.exchange import ExchangePart
from memcli.store.facts import CONTEXTS_AMONG_SQL, FactsPart
from memcli.store.health import HealthPart
from memcli.store.links import LinksPart
from memcli.store.protocol import StoreProtocol
from memcli.store.readers import ReaderPool
from memcli.store.reembed import ReembedPart
from memcli.store.schema import APPLICATION_ID, SCHEMA_VERSION
from memcli.store.search import SearchPart
from memcli.store.sources import DocumentSource, SourcesPart
from memcli.store.types import (
    BUSY_TIMEOUT_MS,
    FACT_TYPES,
    ID_LIMIT,
    INT64_MAX,
    LINK_KINDS,
    Fact,
    InterruptedAfterCommit,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreReadOnly,
    WriteRefused,
    content_hash,
    iso,
    parse_iso,
)
from memcli.store.vectors import VectorsPart


class Store:
    """A connection to one mem store, as parts that each own their SQL: banks, documents,
    facts, entities, links, vectors, search (the arms' reads), reembed, sources (where each
    document came from), exchange (export and import rows) and health (the doctor's
    checks), built on one StoreCore (the connection, its transactions, snapshots and meta).
    Use as a context manager; write inside atomic(). What the rest of mem may rely on is
    memcli.store.protocol.StoreProtocol."""

    def __init__(
        self, path: str | os.PathLike, *, create: bool = True, readonly: bool = False
    ) -> None:
        self.core = core = StoreCore(path, create=create, readonly=readonly)
        self.path: Path = core.path
        self.readonly: bool = core.readonly
        # Built in dependency order: each part is given the siblings it calls.
        self.search = SearchPart(core)
        self.entities = EntitiesPart(core)
        self.links = LinksPart(core)
        self.vectors = VectorsPart(core, self.search)
        self.facts = FactsPart(core, self.vectors, self.entities)
        self.reembed = ReembedPart(core, self.vectors, self.facts)
        self.banks = BanksPart(core, self.facts, self.reembed)
        self.documents = DocumentsPart(core, self.facts, self.vectors, self.banks)
        self.sources = SourcesPart(core, self.documents, self.facts)
        self.exchange = ExchangePart(core, self.vectors)
        self.health = HealthPart(core, self.vectors)
        # Readers of this store that their users closed, kept for the next reader(); and,
        # for a reader, the pool it goes back to.
        self._readers: ReaderPool[Store] = ReaderPool()
        self._home: ReaderPool[Store] | None = None

    # -- transactions ---------------------------------------------------------------------

    def atomic(self) -> AbstractContextManager[object]:
        """One transaction: everything inside commits together or not at all (nested:
        a savepoint)."""
        return self.core.atomic()

    def snapshot(self) -> AbstractContextManager[object]:
        """A read transaction: every read inside sees one consistent state of the store."""
        return self.core.snapshot()

    def change_token(self) -> int:
        """A value that changes whenever another connection commits to the store (SQLite's
        data_version): equal readings before and after reads made on several connections
        mean every one of them saw the same state."""
        return self.core.data_version()

    def schema_version(self) -> int:
        return self.core.schema_version()

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the file (the scale bench's bytes per fact)."""
        self.core.checkpoint()

    def upgradable(self) -> bool:
        """Whether the file is at an older schema than this mem's and could be brought up to
        it: a read-only connection reads it as it is, so a caller that wants this mem's schema
        (Memory's reader pool) upgrades it through a writing connection first."""
        return self.core.version_at_open != SCHEMA_VERSION and self.core.writable()

    def in_transaction(self) -> bool:
        """Whether a transaction is open on this connection (one kept for reuse must have
        none)."""
        return bool(self.core.conn.in_transaction)

    # -- connections ----------------------------------------------------------------------

    def reader(self) -> Store:
        """Another connection to the same file for another thread (an arm of recall): a
        pooled one when there is one. Closing it gives it back to this store's pool.
        StoreError when this connection holds the store alone (a reader on a full disk):
        another would wait for it to close, so the caller reads on this one."""
        if self.core.exclusive:
            raise StoreError(f"{self.path} is held by one connection (the disk is full)")
        reader = self._readers.take()
        if reader is None:
            reader = Store(self.path, create=False, readonly=self.readonly)
            reader._home = self._readers
        return reader

    def holds_alone(self) -> bool:
        """Whether this connection holds the store alone (a reader on a full disk, which
        SQLite gave no room for its shared -shm): every other connection waits until it is
        closed, so it must be closed as soon as its reads are done."""
        return self.core.exclusive

    def close(self) -> None:
        home = self._home
        if home is not None and not self.core.conn.in_transaction and home.give_back(self):
            return
        for reader in self._readers.close():
            reader._home = None
            reader.close()
        self.core.close()

    def abandon(self) -> None:
        """Close a connection whose file was replaced or deleted under it, without the
        checkpoint and WAL removal a close does: the -wal and -shm beside the path now
        belong to the file there, and writing this connection's pages into them would
        corrupt it."""
        try:
            self.core.skip_checkpoint_on_close()
        finally:
            self.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if TYPE_CHECKING:

    def _conforms(store: Store) -> StoreProtocol:
        """A type checker checks here that the SQLite store is what the rest of mem relies
        on (tests/test_store_protocol.py checks it at run time)."""
        return store


T = TypeVar("T")


def fill_new_store(path: str | os.PathLike, fill: Callable[[Store], T]) -> T:
    """Make the store at `path`, where there is none yet, from what fill(store) writes.

    The store is built under a hidden name beside path and linked into place only once fill
    has returned and every connection is closed, so a failure or an interrupt leaves no file
    at path (an empty store there looked like a success to the next command). When another
    process creates a store at path meanwhile, its store is left as it is and this raises
    StoreError. Messages name path, never the hidden one."""
    path = Path(path).expanduser()
    staging = staging_path(path, "building")

    def named(exc: StoreError) -> StoreError:
        text = str(exc).replace(str(staging), str(path)).replace(staging.name, path.name)
        return StoreError(text)

    fd = None
    made: list[Path] = []
    done = False
    try:
        try:
            made = make_private_folders(path)
            remove_dead_staging(path)
            fd = build_schema(staging)
            store = Store(staging, create=False)
        except OSError as exc:  # a parent that is a file, a folder that cannot be made
            raise StoreError(f"cannot create {path}: {exc.strerror or exc}") from exc
        except StoreError as exc:
            raise named(exc) from exc
        try:
            result = fill(store)
        except StoreError as exc:  # disk full, busy, damaged: about the store at path
            raise named(exc) from exc
        finally:
            store.close()
        # The last connection's close folds the write-ahead log into the file; a log left
        # behind holds commits the linked file would lack.
        wal = Path(f"{staging}-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreError(f"could not finish {path}: its new log was not written back")
        try:
            os.link(staging, path)
        except FileExistsError:
            raise StoreError(
                f"another process created {path} meanwhile; nothing was added to it: run "
                "the command again to add to that store"
            ) from None
        except OSError as exc:
            raise StoreError(f"cannot create {path}: {exc.strerror or exc}") from exc
        done = True
        return result
    finally:
        remove_staging(staging)
        if fd is not None:
            os.close(fd)
        if not done:  # the folders made for it go too, if nothing else came into them
            for folder in reversed(made):
                try:
                    folder.rmdir()
                except OSError:
                    break


__all__ = [
    "APPLICATION_ID",
    "BUSY_TIMEOUT_MS",
    "CONTEXTS_AMONG_SQL",
    "DocumentSource",
    "FACT_TYPES",
    "ID_LIMIT",
    "INT64_MAX",
    "LINK_KINDS",
    "SCHEMA_VERSION",
    "Fact",
    "InterruptedAfterCommit",
    "StagingFile",
    "Store",
    "StoreProtocol",
    "StoreBusy",
    "StoreError",
    "StoreFull",
    "StoreReadOnly",
    "WriteRefused",
    "check_bank_name",
    "close_all_connections",
    "content_hash",
    "fill_new_store",
    "is_database_error",
    "is_sqlite_file",
    "iso",
    "parse_iso",
    "staging_leftovers",
]
