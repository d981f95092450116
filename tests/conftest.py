"""Shared fixtures: a real database file per test, the real MiniLM embedder loaded once."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from memcli.models.load import load_embedder
from memcli.retain import Retainer, RetainItem
from memcli.store import Store


@pytest.fixture(autouse=True)
def ctrl_c_as_in_a_fresh_process(request):
    """Every test starts with Python's own Ctrl-C handler and SIGINT unblocked, as a fresh
    `mem` has: a library that changed either in this process (and every child started after,
    which inherits an ignored or blocked SIGINT) made the Ctrl-C tests depend on test order.
    A test that leaves it changed is named in $MEM_TEST_SIGINT_LOG when that is set."""
    yield
    changed = signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    if changed or blocked:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        log = os.environ.get("MEM_TEST_SIGINT_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as out:
                out.write(f"{request.node.nodeid} changed={changed} blocked={blocked}\n")


@pytest.fixture(scope="session")
def embedder():
    return load_embedder()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "mem.db"


@pytest.fixture
def store(db_path: Path):
    with Store(db_path) as s:
        yield s


@pytest.fixture
def remember(store: Store, embedder):
    """remember(text, at=..., **fields) or remember([RetainItem, ...]) into the 'default' bank."""

    def _remember(items, bank: str = "default", **fields):
        if isinstance(items, str):
            items = [RetainItem(text=items, **fields)]
        retainer = Retainer(store, bank, embedder, now=datetime(2026, 11, 20))
        return retainer.retain(items)

    return _remember


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


@pytest.fixture
def bare_fact():
    """bare_fact(store, bank, number, embedding, at, start=, end=, now=, text=, fact_type=): a
    fact with this vector, time and text and nothing else (no entities, tags or document),
    written straight through the store, for tests of the vector, time and keyword search that
    need facts retain would not make. Call inside store.atomic(); returns its id."""
    return _insert_bare_fact


def _insert_bare_fact(
    store: Store,
    bank: int,
    number: int,
    embedding,
    at: datetime,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    now: datetime | None = None,
    text: str | None = None,
    fact_type: str = "world",
) -> int:
    return store.facts.insert_fact(
        bank_id=bank,
        text=text or f"fact {number}",
        context=None,
        fact_type=fact_type,
        mentioned_at=at,
        occurred_start=start,
        occurred_end=end,
        tags=[],
        metadata={},
        source_id=None,
        document_id=None,
        chunk_id=None,
        content_hash=f"h{number}",
        entity_names=[],
        embedding=embedding,
        now=now or at,
    )


def run_at_terminal(
    argv: list[str], react: Callable[[bytes, int, int], None], env: dict | None = None
) -> tuple[int, str]:
    """Run argv on a pseudo-terminal; after each chunk of output, react(all output so far,
    pid, terminal fd) may type into it or signal the process. (exit code, what the terminal
    showed)."""
    import os
    import pty
    import select
    import time

    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execvpe(argv[0], argv, os.environ if env is None else env)
        finally:
            os._exit(127)
    out = b""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.5)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            react(out, pid, fd)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")


def answer_at_terminal(argv: list[str], answer: bytes) -> tuple[int, str]:
    """Run argv on a pseudo-terminal, answering its y/N question with `answer` (bytes, as
    typed: b"n\\n", or b"\\x04" for end of input); (exit code, what the terminal showed)."""
    import os

    answered = []

    def answer_once(out: bytes, pid: int, fd: int) -> None:
        if not answered and b"[y/N]" in out:
            os.write(fd, answer)
            answered.append(True)

    return run_at_terminal(argv, answer_once)


# -- PostgreSQL (tests/postgres_server.py): one server a session, a database a test ------


@pytest.fixture(scope="session")
def pg_server():
    from tests.postgres_server import PgTestServer

    server = PgTestServer()
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server) -> str:
    """The URL of a new, empty database on the session's server (dropped after the test)."""
    name = pg_server.create_database()
    yield pg_server.url(name)
    pg_server.drop_database(name)
