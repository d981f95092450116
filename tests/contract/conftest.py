"""The backend contract: what every store behind `Memory` must do, tested through `Memory`
only (never its SQL). Each test runs once per backend; SQLite today."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memcli import Memory

BACKENDS = ["sqlite"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def open_memory(backend: str, tmp_path: Path) -> Iterator[Callable[..., Memory]]:
    """open_memory(name="main", **kw): a Memory on a fresh store of this backend (the same
    name, the same store), closed at the end of the test."""
    opened: list[Memory] = []

    def make(name: str = "main", **kw) -> Memory:
        memory = Memory(tmp_path / f"{name}.db", **kw)
        opened.append(memory)
        return memory

    yield make
    for memory in opened:
        memory.close()


@pytest.fixture
def memory(open_memory: Callable[..., Memory]) -> Memory:
    return open_memory()
