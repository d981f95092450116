"""Where a store is: a path (the SQLite file) or a postgresql:// URL (a database on a
PostgreSQL server with pgvector). open_store is the one place that opens either; the light
helpers (telling them apart, showing a URL without its password) are memcli/storeurl.py."""

from __future__ import annotations

import os
from typing import Any

from memcli.store.types import StoreError
from memcli.storeurl import (
    StoreURL,
    is_postgres_url,
    location_of,
    location_problem,
    shown,
)


def open_store(location: str | os.PathLike, *, create: bool = True, readonly: bool = False) -> Any:
    """The store at location: a PgStore for a postgresql:// URL, else the SQLite Store."""
    problem = location_problem(location)
    if problem:
        raise StoreError(problem)
    if is_postgres_url(location):
        from memcli.store.postgres import PgStore

        return PgStore(str(location), create=create, readonly=readonly)
    from memcli.store import Store

    return Store(location, create=create, readonly=readonly)


__all__ = [
    "StoreURL",
    "location_of",
    "location_problem",
    "open_store",
    "shown",
    "store_exists",
]


def store_exists(location: str | os.PathLike) -> bool:
    """Whether there is a store at location yet: a file at the path, or a database that
    holds a mem store. A server that cannot be reached answers True: opening the store then
    says what is wrong."""
    if not is_postgres_url(location):
        return os.path.lexists(location)
    from memcli.store.postgres import PgStore

    try:
        PgStore(str(location), create=False, readonly=True).close()
    except StoreError as exc:
        return "no mem store" not in str(exc)
    return True
