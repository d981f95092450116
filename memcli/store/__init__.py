"""The one SQLite file and the one home of mem's SQL.

`Store` is a connection to one file; its methods (grouped by what they touch, one module
each: banks, documents, facts, entities, vectors, links, search) are the whole interface the
rest of mem uses. Opening never modifies a file that is not a mem store (base.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from memcli.store.banks import BanksMixin, check_bank_name
from memcli.store.base import (
    StagingFile,
    StoreBase,
    build_schema,
    is_sqlite_file,
    make_private_folders,
    remove_dead_staging,
    remove_staging,
    staging_leftovers,
    staging_path,
)
from memcli.store.documents import DocumentsMixin
from memcli.store.entities import EntitiesMixin
from memcli.store.facts import CONTEXTS_AMONG_SQL, FactsMixin
from memcli.store.health import HealthMixin
from memcli.store.lifecycle import LifecycleMixin
from memcli.store.links import LinksMixin
from memcli.store.readers import ReaderPoolMixin
from memcli.store.schema import APPLICATION_ID, SCHEMA_VERSION
from memcli.store.search import SearchMixin
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
    content_hash,
    iso,
    parse_iso,
)
from memcli.store.vectors import VectorsMixin


class Store(
    BanksMixin,
    DocumentsMixin,
    FactsMixin,
    EntitiesMixin,
    VectorsMixin,
    LinksMixin,
    SearchMixin,
    LifecycleMixin,
    HealthMixin,
    ReaderPoolMixin,
    StoreBase,
):
    """A connection to one mem store. Use as a context manager; write inside atomic()."""


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
    "FACT_TYPES",
    "ID_LIMIT",
    "INT64_MAX",
    "LINK_KINDS",
    "SCHEMA_VERSION",
    "Fact",
    "InterruptedAfterCommit",
    "StagingFile",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoreFull",
    "StoreReadOnly",
    "check_bank_name",
    "content_hash",
    "fill_new_store",
    "is_sqlite_file",
    "iso",
    "parse_iso",
    "staging_leftovers",
]
