"""The fault suite's quick cases (issue 30): representative faults of each kind, through the
real CLI, the real MCP client SDK and real foreign SQLite clients, each followed by an exact
count of what was acknowledged against what is in the store. The long run that prints
figures is scripts/faults.py (its table is in bench/RESULTS.md); these use its parts."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from scripts.faults import fill, mem_argv, read_only_media, tmpfs

READ_COMMANDS = [
    ["recall", "Lisbon"],
    ["list"],
    ["show", "1"],
    ["stats"],
    ["banks"],
    ["export"],
    ["doctor"],
]


def mem(db: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memcli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        **kw,
    )


def no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("how", ["folder", "mount"])
def test_a_cleanly_closed_store_on_read_only_media_can_be_read(tmp_path, how):
    """recall, list, show, stats, banks, export and doctor read a store whose folder or file
    system cannot be written (nobody can write it, so no -wal can appear: SQLite reads it as
    immutable); writing commands say it is read-only; nothing is created or changed."""
    folder = tmp_path / "media"
    folder.mkdir()
    db = folder / "mem.db"
    done = mem(db, "retain", "Maya flew to Lisbon on May 9.")
    assert done.returncode == 0, done.stderr
    with read_only_media(folder, how) as ro_db:
        before = ro_db.read_bytes()
        for args in READ_COMMANDS:
            done = mem(ro_db, *args)
            no_traceback(done)
            assert done.returncode == 0, (args, done.stderr)
        assert "Lisbon" in mem(ro_db, "recall", "Lisbon").stdout
        assert '"kind":"fact"' in mem(ro_db, "export").stdout
        for args in (["retain", "Written on read-only media."], ["forget", "1", "--yes"]):
            done = mem(ro_db, *args)
            no_traceback(done)
            assert done.returncode == 1, (args, done.stderr)
            assert "read-only" in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
        assert ro_db.read_bytes() == before
        assert sorted(p.name for p in ro_db.parent.iterdir()) == ["mem.db"]
    with sqlite3.connect(db) as check:
        assert check.execute("select count(*) from facts").fetchone() == (1,)


def test_the_read_only_media_helper_really_refuses_writes(tmp_path):
    folder = tmp_path / "media"
    folder.mkdir()
    (folder / "mem.db").write_bytes(b"x")
    for how in ("folder", "mount"):
        with read_only_media(folder, how) as ro_db:
            with pytest.raises(OSError):
                (ro_db.parent / "other").write_bytes(b"y")
            if os.geteuid() == 0 or how == "folder":
                with pytest.raises(OSError):
                    ro_db.write_bytes(b"z")


@contextmanager
def full_disk(tmp_path: Path, how: str) -> Iterator[tuple[Path, int | None]]:
    """(folder, fsize): a folder on a tmpfs filled to the last byte (root), or any folder
    with fsize, the RLIMIT_FSIZE that stands for a full disk in the commands run there."""
    if how == "tmpfs":
        if os.geteuid() != 0:
            pytest.skip("a tmpfs needs root (the rlimit variant runs instead)")
        with tmpfs(8 << 20, tmp_path) as folder:
            yield folder, None
        return
    folder = tmp_path / "limited"
    folder.mkdir()
    yield folder, 1


def run_argv(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("how", ["tmpfs", "rlimit"])
def test_a_cleanly_closed_store_on_a_full_disk_can_be_exported_and_read(tmp_path, how):
    """export (and list, show, banks) only read, yet failed with "disk I/O error" on a full
    disk: the first connection to a store creates its -shm and grows it to 32 KiB, which a
    full disk refuses. Again after a failed write left an empty -wal and a short -shm."""
    with full_disk(tmp_path, how) as (folder, fsize):
        db = folder / "mem.db"
        done = mem(db, "retain", "Maya flew to Lisbon on May 9.")
        assert done.returncode == 0, done.stderr
        if fsize is None:
            fill(folder)
        for attempt in ("clean", "after a failed write"):
            for args in (["export"], ["list"], ["show", "1"], ["banks"]):
                done = run_argv(mem_argv(db, *args, fsize=fsize))
                no_traceback(done)
                assert done.returncode == 0, (attempt, args, done.stderr)
            assert "Lisbon" in run_argv(mem_argv(db, "export", fsize=fsize)).stdout
            done = run_argv(mem_argv(db, "retain", "Cannot fit.", fsize=fsize))
            no_traceback(done)
            assert done.returncode == 1 and "disk full" in done.stderr, done.stderr
        (folder / ".filler").unlink(missing_ok=True)  # Python's sqlite3 needs room for a -shm
        with sqlite3.connect(db) as check:
            assert check.execute("select count(*) from facts").fetchone() == (1,)
            assert check.execute("pragma integrity_check").fetchone() == ("ok",)
