"""The fault suite's quick cases (issue 30): representative faults of each kind, through the
real CLI, the real MCP client SDK and real foreign SQLite clients, each followed by an exact
count of what was acknowledged against what is in the store. The long run that prints
figures is scripts/faults.py (its table is in bench/RESULTS.md); these use its parts."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.faults import read_only_media

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
