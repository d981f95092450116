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


__all__ = ["StoreURL", "location_of", "location_problem", "open_store", "shown"]
