"""Exit codes and one-line messages at the store's edges (issue 30, finding 3), through the
real CLI and the real MCP client: each says what happened, in one line, with the exit status
the README documents (1 an error, 2 a usage error)."""

from __future__ import annotations

import asyncio
import os
import resource
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from mcp import Client

from tests.test_mcp import server_params, text_of

MEM = [sys.executable, "-m", "memcli"]


def mem(db: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("stdin", subprocess.DEVNULL)
    env = {**os.environ, **kw.pop("env", {})}
    return subprocess.run([*MEM, "--db", str(db), *args], text=True, env=env, **kw)


def one_line(done: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    err = done.stderr.strip()
    assert done.returncode == code, (done.returncode, err)
    assert len(err.splitlines()) == 1 and err.startswith("mem: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def seeded(db_path: Path) -> Path:
    assert mem(db_path, "retain", "The spare key is under the blue pot.").returncode == 0
    return db_path


def count(db: Path) -> int:
    with sqlite3.connect(db) as c:
        return c.execute("select count(*) from facts").fetchone()[0]


def test_a_bad_busy_timeout_variable_is_a_setting_error(seeded):
    """Before: exit 2, where every other bad MEM_* value exits 1."""
    one_line(mem(seeded, "stats", env={"MEM_BUSY_TIMEOUT_MS": "abc"}), 1, "MEM_BUSY_TIMEOUT_MS")


def test_output_that_cannot_be_written_after_a_retain_says_it_was_stored(seeded):
    """Before: "No space left on device", exit 1, and a retry stored it twice."""
    with open("/dev/full", "w") as full:
        done = mem(seeded, "retain", "--json", "The bins go out on Thursday.", stdout=full)
    one_line(done, 1, "stored", "do not run it again")
    assert count(seeded) == 2


@contextmanager
def full_disk(tmp_path: Path) -> Iterator[tuple[Path, dict]]:
    """A folder whose file system is full: a 1 MiB tmpfs where this runs as root, else a
    folder whose writers run under RLIMIT_FSIZE (every file growth fails, as on a full disk).
    Yields the folder and the subprocess keyword arguments that make the writes fail."""
    folder = tmp_path / "full"
    folder.mkdir()
    mounted = False
    if os.geteuid() == 0:
        mounted = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                capture_output=True,
            ).returncode
            == 0
        )
    try:
        if mounted:
            yield folder, {"fill": True}
        else:

            def limit() -> None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 1024, 16 * 1024))

            yield folder, {"preexec_fn": limit}
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(folder: Path) -> None:
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def test_a_full_disk_is_named_as_such_not_as_a_foreign_file(tmp_path):
    """Before: forget on a full disk said "cannot read ... as SQLite: cannot rollback - no
    transaction is active (left untouched)", as if the file were not a store."""
    with full_disk(tmp_path) as (folder, how):
        db = folder / "m.db"
        for i in range(3):
            assert mem(db, "retain", f"Fact number {i} about tea.").returncode == 0
        kw = {}
        if how.get("fill"):
            fill(folder)
        else:
            kw = how
        for args in (["forget", "1", "--yes"], ["retain", "One more."]):
            err = one_line(mem(db, *args, **kw), 1)
            assert "disk full" in err or "could not" in err, err
            assert "cannot rollback" not in err and "left untouched" not in err, err
        # list only reads: it reads the store as it is (tests/test_faults.py has the rest).
        done = mem(db, "list", **kw)
        assert done.returncode == 0 and "Fact number 2" in done.stdout, done.stderr
        (folder / "filler").unlink(missing_ok=True)
        assert count(db) == 3


HOLD_EXCLUSIVE = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA locking_mode = EXCLUSIVE")
c.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(30)
"""


def test_a_store_locked_exclusively_is_named_locked(seeded):
    """Before: recall said "cannot read X as SQLite: database is locked (left untouched)",
    which reads as a foreign file."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_EXCLUSIVE, str(seeded)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        for args in (["recall", "key"], ["list"], ["retain", "Written while locked."]):
            done = mem(seeded, *args, env={"MEM_BUSY_TIMEOUT_MS": "200"})
            err = one_line(done, 1, "locked by another process")
            assert "left untouched" not in err
    finally:
        holder.kill()
        holder.wait()
    assert count(seeded) == 1


@pytest.mark.parametrize("args", [["list"], ["recall", "key"], ["show", "1"], ["stats"]])
def test_a_closed_stdout_is_an_error_for_commands_whose_output_is_the_result(seeded, args):
    """Before: `mem list >&-` and `mem recall >&-` exited 0 having printed nothing."""
    done = subprocess.run(
        [*MEM, "--db", str(seeded), *args],
        stdout=None,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        pass_fds=(),
        preexec_fn=lambda: os.close(1),
    )
    one_line(done, 1, "stdout is closed")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["forget", "--yes"], "say what to forget"),
        (["correct", "1", ""], "new text is empty"),
        (["correct", "1", " \t"], "new text is empty"),
        (["list", "--tag", ""], "--tag"),
        (["recall", "--tag", " ", "key"], "--tag"),
        (["forget", "--tag", "", "--yes"], "--tag"),
    ],
)
def test_usage_errors_exit_2_and_name_the_argument(seeded, args, needle):
    """Before: forget --yes with no selector exited 1; correct 1 '' blamed the old fact's
    source id ("src-1: text is empty"); list --tag '' was accepted where retain refuses it."""
    err = one_line(mem(seeded, *args), 2, needle)
    assert "src-" not in err
    assert count(seeded) == 1


def test_mcp_argument_errors_are_one_line_and_never_name_the_store_path(tmp_path):
    """Before: a pydantic error of four lines with a link, and errors naming the store's
    absolute path (a detail of the machine an agent's host may show or log)."""
    foreign = tmp_path / "secret-folder" / "notes.db"
    foreign.parent.mkdir()
    with sqlite3.connect(foreign) as c:
        c.execute("create table notes(x)")

    async def session() -> list:
        async with Client(server_params(foreign)) as client:
            return [
                await client.call_tool("recall", {"query": "x", "max_tokens": -1}),
                await client.call_tool("recall", {"query": "x", "budget": "huge"}),
                await client.call_tool("recall", {"budget": "low"}),
                await client.call_tool("retain", {"text": "x", "tags": "not-a-list"}),
                await client.call_tool("recall", {"query": "anything"}),
            ]

    results = asyncio.run(asyncio.wait_for(session(), timeout=120))
    for result, needle in zip(
        results, ["max_tokens", "budget", "query", "tags", "not a mem store"], strict=True
    ):
        text = text_of(result)
        assert result.is_error and "\n" not in text, text
        assert needle in text, text
        assert "secret-folder" not in text and "pydantic" not in text, text


def test_a_url_is_refused_and_never_taken_for_a_path(tmp_path, monkeypatch):
    """Issue 32: `mem --db postgresql://user@host/db retain ...` said "1 facts stored" and
    made a folder named "postgresql:" with a SQLite store inside. A postgresql:// URL now
    names a PostgreSQL store (tests/test_postgres.py); a URL of any other scheme is refused
    wherever a store location is given: flag, MEM_DB, the config, the library. A
    postgresql:// URL whose server is not there is a one-line error, never a path either."""
    from memcli import MemError, Memory

    monkeypatch.chdir(tmp_path)
    url = "mysql://user@host/db"
    done = subprocess.run(
        [*MEM, "--db", url, "retain", "hello"], capture_output=True, text=True, cwd=tmp_path
    )
    one_line(done, 2, "--db", "mysql://")
    env = {**os.environ, "MEM_DB": url}
    done = subprocess.run([*MEM, "stats"], capture_output=True, text=True, env=env, cwd=tmp_path)
    one_line(done, 1, "MEM_DB", "mysql://")
    config = tmp_path / "config.toml"
    done = subprocess.run(
        [*MEM, "config", "set", "db", url],
        capture_output=True,
        text=True,
        env={**os.environ, "MEM_CONFIG": str(config)},
        cwd=tmp_path,
    )
    assert done.returncode != 0 and "mysql://" in done.stderr
    with pytest.raises(MemError) as refused:
        Memory(url)
    assert refused.value.field == "db" and refused.value.usage
    # A server that is not there (a socket folder that does not exist: no network needed).
    down = "postgresql://user:hunter2@/db?host=/nonexistent-mem-socket"
    done = subprocess.run(
        [*MEM, "--db", down, "retain", "hello"], capture_output=True, text=True, cwd=tmp_path
    )
    one_line(done, 1, "cannot reach the PostgreSQL server", "postgresql://user:***@")
    assert "hunter2" not in done.stderr
    assert list(tmp_path.iterdir()) == []
