"""No acknowledged write is lost beside another SQLite client (issue 30, finding 1).

On POSIX, closing any descriptor of a file drops every lock the process holds on it. A plain
open() and close() of the store (or its -wal/-shm) in a process with a live connection let
another process's SQLite believe it was the last user: its close checkpointed and deleted the
-wal and -shm under the live connection, whose next writes went into the deleted log, were
acknowledged, and were gone once it exited. These tests run that scenario for real: a
long-lived connection (the `mem mcp` server, and a Store in this process) with recalls and
retains between readers and writers of Python's sqlite3 module and the sqlite3 shell, then
count every acknowledged write.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from mcp import Client

from memcli.store import Store
from memcli.store.base import inspect_file, is_sqlite_file
from tests.test_mcp import server_params


def foreign_read(db: Path) -> int:
    """A count through another process's SQLite, as a user peeking at the store does."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "print(c.execute('select count(*) from facts').fetchone()[0]); c.close()",
            str(db),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def shell_read(db: Path) -> None:
    """The sqlite3 shell, where the machine has it (Python's sqlite3 is read beside it)."""
    if shutil.which("sqlite3"):
        subprocess.run(
            ["sqlite3", str(db), "select count(*) from facts"], capture_output=True, check=True
        )


def mapped_deleted(db: Path) -> bool:
    """Whether this process maps a deleted -shm of the store (the symptom)."""
    maps = Path(f"/proc/{os.getpid()}/maps").read_text()
    return any(f"{db.name}-shm (deleted)" in line for line in maps.splitlines())


def test_a_reader_connection_keeps_the_locks_of_the_live_one(db_path):
    with Store(db_path) as store:
        with store.atomic():
            store.core.set_meta("probe", "1")
        # What recall does: a pooled reader opened while the main connection is live, and
        # every file check a process makes of its own store.
        store.reader().close()
        inspect_file(db_path)
        assert is_sqlite_file(db_path)
        foreign_read(db_path)
        shell_read(db_path)
        assert Path(f"{db_path}-wal").exists() and Path(f"{db_path}-shm").exists()
        assert not mapped_deleted(db_path)
        with store.atomic():
            store.core.set_meta("after", "2")
    with sqlite3.connect(db_path) as other:
        assert other.execute("select value from meta where key = 'after'").fetchone() == ("2",)


def cli(db: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    params = server_params(db)
    return subprocess.run(
        [params.command, *params.args[:-1], *args],
        input=input,
        capture_output=True,
        text=True,
        env={**os.environ, **(params.env or {})},
    )


def test_a_long_lived_mcp_server_loses_no_acknowledged_write(db_path, tmp_path):
    """The issue's scenario, several rounds: MCP recall, foreign readers, MCP retain, CLI
    retain, a 100-item JSONL retain, foreign readers again; after the server exits every
    acknowledged fact is in the file."""
    rounds = 3
    acknowledged: list[str] = []

    async def session() -> None:
        async with Client(server_params(db_path)) as client:
            first = await client.call_tool("retain", {"text": "The first note of the server."})
            assert not first.is_error
            acknowledged.append("The first note of the server.")
            for r in range(rounds):
                got = await client.call_tool("recall", {"query": "note", "now": "2026-11-20"})
                assert not got.is_error, got.content
                foreign_read(db_path)
                shell_read(db_path)
                text = f"Round {r} said through the server."
                done = await client.call_tool("retain", {"text": text})
                assert not done.is_error, done.content
                acknowledged.append(text)
                text = f"Round {r} said through the command line."
                out = cli(db_path, "retain", text)
                assert out.returncode == 0, out.stderr
                acknowledged.append(text)
                batch = tmp_path / f"batch{r}.jsonl"
                rows = [f"Round {r} batch item number {i} for the count." for i in range(100)]
                batch.write_text("\n".join(json.dumps({"text": t}) for t in rows) + "\n")
                out = cli(db_path, "retain", "--jsonl", str(batch))
                assert out.returncode == 0, out.stderr
                acknowledged.extend(rows)
                foreign_read(db_path)
                got = await client.call_tool("recall", {"query": "batch", "now": "2026-11-20"})
                assert not got.is_error, got.content
                done = await client.call_tool("retain", {"text": f"Round {r} after the batch."})
                assert not done.is_error, done.content
                acknowledged.append(f"Round {r} after the batch.")

    asyncio.run(asyncio.wait_for(session(), timeout=300))
    with sqlite3.connect(db_path) as check:
        stored = {row[0] for row in check.execute("select text from facts")}
        assert check.execute("pragma integrity_check").fetchone() == ("ok",)
    missing = [t for t in acknowledged if t not in stored]
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:3]}"


def test_the_store_is_never_read_as_input_or_written_as_output(db_path, tmp_path):
    """The commands that read or write a file a user names refuse the store and its log
    under any name (a hard link included): reading them with open() beside a connection
    would drop its locks, and writing them would destroy the store."""
    assert cli(db_path, "retain", "The spare key is under the blue pot.").returncode == 0
    link = tmp_path / "other-name.db"
    os.link(db_path, link)
    for args in (
        ["retain", "--file", str(db_path)],
        ["retain", "--jsonl", str(link)],
        ["import", str(link)],
        ["export", "-o", str(link)],
    ):
        out = cli(db_path, *args)
        assert out.returncode == 1, (args, out.stderr)
        assert "store" in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, (args, out.stderr)
    with sqlite3.connect(db_path) as check:
        assert check.execute("select count(*) from facts").fetchone() == (1,)
        assert check.execute("pragma integrity_check").fetchone() == ("ok",)


def test_a_long_lived_memory_loses_no_acknowledged_write(db_path):
    """The same scenario with the library: one Memory kept open (as a program embedding mem
    keeps it), recalls and retains between foreign readers and writers."""
    from memcli import Memory

    acknowledged = []
    with Memory(db_path) as memory:
        for r in range(5):
            text = f"Round {r} retained through the library."
            memory.retain(text)
            acknowledged.append(text)
            memory.recall("retained", now="2026-11-20")
            foreign_read(db_path)
            shell_read(db_path)
            with sqlite3.connect(db_path) as writer:  # a foreign writer, of mem's own meta
                writer.execute("insert or replace into meta(key, value) values('peek', ?)", (r,))
            memory.list()
            assert not mapped_deleted(db_path)
    with sqlite3.connect(db_path) as check:
        stored = {row[0] for row in check.execute("select text from facts")}
    assert set(acknowledged) <= stored
