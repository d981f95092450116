"""Where a store is: a path (the SQLite file) or a postgresql:// URL (a database on a
PostgreSQL server with pgvector). open_store is the one place that tells them apart."""

from __future__ import annotations

import os
from typing import Any

from memcli.store.postgres.url import is_postgres_url, looks_like_url, masked, url_problem
from memcli.store.types import StoreError


def location_problem(location: str | os.PathLike) -> str | None:
    """What is wrong with a store location, or None: a URL of another scheme is never taken
    for a path (it made a folder named 'mysql:' holding a SQLite store)."""
    if is_postgres_url(location):
        return url_problem(str(location))
    if looks_like_url(location):
        return (
            f"{masked(str(location))} is not a store location mem knows: give a file path or a "
            "postgresql:// URL"
        )
    return None


def shown(location: str | os.PathLike) -> str:
    """The location as output may show it (a URL without its password)."""
    return masked(str(location)) if is_postgres_url(location) else str(location)


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
