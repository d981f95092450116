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


class StoreURL(str):
    """A postgresql:// store location where the CLI keeps a path (state.db): the few
    questions asked of a path have answers here, so the commands need no second branch.
    str() is the URL itself (with any password: pass it to open_store, never print it;
    shown() is for output)."""

    def expanduser(self) -> StoreURL:
        return self

    def resolve(self) -> StoreURL:
        return self

    def absolute(self) -> StoreURL:
        return self

    def exists(self) -> bool:
        """Whether the database holds a mem store. A server that cannot be reached answers
        True: opening the store then says what is wrong."""
        try:
            from memcli.store.postgres import PgStore

            PgStore(str(self), create=False, readonly=True).close()
        except StoreError as exc:
            return "no mem store" not in str(exc)
        return True

    @property
    def parent(self) -> None:  # pragma: no cover - nothing beside a database
        return None

    def __repr__(self) -> str:
        return f"StoreURL({masked(str(self))!r})"


def location_of(raw: str | os.PathLike) -> Any:
    """A configured store location: StoreURL for a postgresql:// URL, else a Path (~ expanded)."""
    from pathlib import Path

    if is_postgres_url(raw):
        return StoreURL(str(raw))
    return Path(raw).expanduser()
