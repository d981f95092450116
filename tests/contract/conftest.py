"""The backend contract: what every store behind `Memory` must do, tested through `Memory`
only (never its SQL). Each test runs once per backend: a SQLite file, and a database on the
PostgreSQL server the tests start (tests/postgres_server.py; never skipped: a suite that
cannot reach it fails)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memcli import Memory

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store_location(backend: str, tmp_path: Path, request: pytest.FixtureRequest):
    """store_location(name): where the store called name lives on this backend (the same
    name, the same store): a file in the test's folder, or a database made for the test."""
    if backend == "sqlite":
        yield lambda name: tmp_path / f"{name}.db"
        return
    server = request.getfixturevalue("pg_server")
    databases: dict[str, str] = {}

    def url(name: str) -> str:
        if name not in databases:
            databases[name] = server.create_database()
        return server.url(databases[name])

    yield url
    for database in databases.values():
        server.drop_database(database)


@pytest.fixture
def open_memory(store_location: Callable[[str], object]) -> Iterator[Callable[..., Memory]]:
    """open_memory(name="main", **kw): a Memory on a fresh store of this backend (the same
    name, the same store), closed at the end of the test."""
    opened: list[Memory] = []

    def make(name: str = "main", **kw) -> Memory:
        memory = Memory(store_location(name), **kw)  # type: ignore[arg-type]
        opened.append(memory)
        return memory

    yield make
    for memory in opened:
        memory.close()


@pytest.fixture
def memory(open_memory: Callable[..., Memory]) -> Memory:
    return open_memory()
