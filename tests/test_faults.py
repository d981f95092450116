"""The fault suite's quick cases (issue 30): representative faults of each kind, through the
real CLI, the real MCP client SDK and real foreign SQLite clients, each followed by an exact
count of what was acknowledged against what is in the store. The long run that prints
figures is scripts/faults.py (its table is in bench/RESULTS.md); these use its parts."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from memcli.retain import Retainer, RetainItem
from memcli.store import Store
from scripts.faults import (
    Run,
    Sizes,
    Suite,
    Tally,
    command_run,
    concurrent_run,
    fill,
    jsonl_rows,
    mem_argv,
    read_only_media,
    tmpfs,
    write_jsonl,
    write_locked,
)

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
        out = {}
        for args in READ_COMMANDS:
            done = mem(ro_db, *args)
            no_traceback(done)
            assert done.returncode == 0, (args, done.stderr)
            out[args[0]] = done.stdout
        assert "Lisbon" in out["recall"] and "Lisbon" in out["show"]
        assert '"kind":"fact"' in out["export"]
        for args in (["retain", "Written on read-only media."], ["forget", "1", "--yes"]):
            done = mem(ro_db, *args)
            no_traceback(done)
            assert done.returncode == 1, (args, done.stderr)
            assert "read-only" in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
        assert ro_db.read_bytes() == before
        assert sorted(p.name for p in ro_db.parent.iterdir()) == ["mem.db"]
    with closing(sqlite3.connect(db)) as check:
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
def full_disk(tmp_path: Path, how: str, size: int = 8 << 20) -> Iterator[tuple[Path, int | None]]:
    """(folder, fsize): a folder on a tmpfs of this size ("tmpfs", root only), or a plain
    folder with fsize 1, the RLIMIT_FSIZE that stands for a full disk ("rlimit")."""
    if how == "tmpfs":
        with tmpfs(size, tmp_path) as folder:
            yield folder, None
        return
    folder = tmp_path / "limited"
    folder.mkdir()
    yield folder, 1


def run_argv(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


# A small tmpfs where the tests run as root, RLIMIT_FSIZE otherwise: one of them always runs.
FULL_DISK = "tmpfs" if os.geteuid() == 0 else "rlimit"


def test_a_cleanly_closed_store_on_a_full_disk_can_be_exported_and_read(tmp_path):
    """export (and list, show, banks) only read, yet failed with "disk I/O error" on a full
    disk: the first connection to a store creates its -shm and grows it to 32 KiB, which a
    full disk refuses. Again after a failed write left an empty -wal and a short -shm."""
    with full_disk(tmp_path, FULL_DISK) as (folder, fsize):
        db = folder / "mem.db"
        done = mem(db, "retain", "Maya flew to Lisbon on May 9.")
        assert done.returncode == 0, done.stderr
        if fsize is None:
            fill(folder)
        for attempt, reads in (
            ("clean", (["export"], ["list"])),
            ("after a failed write", (["export"], ["show", "1"], ["banks"])),
        ):
            for args in reads:
                done = run_argv(mem_argv(db, *args, fsize=fsize))
                no_traceback(done)
                assert done.returncode == 0, (attempt, args, done.stderr)
                assert args[0] == "banks" or "Lisbon" in done.stdout
            done = run_argv(mem_argv(db, "retain", "Cannot fit.", fsize=fsize))
            no_traceback(done)
            assert done.returncode == 1 and "disk full" in done.stderr, done.stderr
        (folder / ".filler").unlink(missing_ok=True)  # Python's sqlite3 needs room for a -shm
        with closing(sqlite3.connect(db)) as check:
            assert check.execute("select count(*) from facts").fetchone() == (1,)
            assert check.execute("pragma integrity_check").fetchone() == ("ok",)


@pytest.mark.skipif(FULL_DISK != "tmpfs", reason="a full file system in this process: root")
def test_a_long_lived_memory_lets_go_of_a_store_it_read_alone_on_a_full_disk(tmp_path):
    """A read on a full disk holds the store alone (SQLite has no room for the shared -shm).
    A Memory kept it open after list or export (as the MCP server's Memory does), so once
    there was room again every other process waited for its lock until the Memory wrote."""
    from memcli.memory import Memory

    with full_disk(tmp_path, FULL_DISK) as (folder, _):
        db = folder / "mem.db"
        assert mem(db, "retain", "Maya flew to Lisbon on May 9.").returncode == 0
        fill(folder)
        with Memory(db) as memory:
            assert ["Lisbon" in f.text for f in memory.list()] == [True]
            _, lines = memory.export_lines()
            assert "Lisbon" in "".join(lines)
            (folder / ".filler").unlink()
            env = {**os.environ, "MEM_BUSY_TIMEOUT_MS": "3000"}
            done = mem(db, "retain", "Room again on the disk.", env=env)
            assert done.returncode == 0, done.stderr
            assert len(memory.list()) == 2


# -- the suite's runs, on a small prepared store ----------------------------------------------


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Suite:
    """A store prepared once for these tests (seed facts, a document, a bank to re-embed,
    an export file to import); each run works on its own copy."""
    prepared = Suite(tmp_path_factory.mktemp("faults"), seed=7, sizes=Sizes.tiny())
    prepared.prepare(calibrate=False)
    return prepared


def clean(tally: Tally) -> Tally:
    assert not tally.bad, "\n".join(tally.notes)
    assert tally.runs == 1
    return tally


def new_run(suite: Suite, kind: str) -> Run:
    suite.number += 1
    run = Run(suite, kind, suite.number)
    run.copy_store()
    return run


def facts_with_source(db: Path, prefix: str) -> int:
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)) as conn:
            return conn.execute(
                "SELECT count(*) FROM facts WHERE source_id LIKE ?", (f"{prefix}%",)
            ).fetchone()[0]
    except sqlite3.Error:
        return 0


def test_kill_9_during_a_2000_item_retain_keeps_whole_batches(suite):
    """kill -9 right after the first batches committed: the store holds whole batches of
    64, in order, and nothing else; doctor passes and the next retain is stored."""
    run = new_run(suite, "kill9:retain-jsonl")
    prefix = f"b{run.number}-"
    tally = clean(
        command_run(
            run,
            "retain-jsonl",
            signal.SIGKILL,
            at=lambda: facts_with_source(run.db, prefix) >= 64,
        )
    )
    assert tally.faults == 1
    kept = [n for n in tally.notes if "exit -9" in n]
    assert kept, tally.notes


def test_ctrl_c_during_an_import_leaves_no_bank(suite):
    """Ctrl-C while the import writes its one transaction (it holds the write lock): exit
    130, no bank imp, no traceback; the store takes the next retain."""
    # The write lasts ~0.2 s: a signal sent as the lock is seen may land after the commit
    # (then the import is done, exit 0, also clean). Up to 4 tries for one Ctrl-C inside it;
    # every try must be clean.
    notes = []
    for _ in range(4):
        run = new_run(suite, "sigint:import")
        tally = clean(
            command_run(
                run,
                "import",
                signal.SIGINT,
                at=lambda db=run.db: write_locked(db),
                into_new=False,
                vectors=True,
            )
        )
        assert tally.faults == 1, tally.notes
        notes += tally.notes
        if any("exit 130" in n for n in tally.notes):
            break
    assert any("exit 130" in n for n in notes), notes


def test_kill_9_during_a_document_replace_keeps_the_old_version_whole(suite):
    """kill -9 once the new version is being staged: doc-main is its old version, whole."""
    run = new_run(suite, "kill9:retain-document")

    def staging() -> bool:
        try:
            with closing(sqlite3.connect(f"file:{run.db}?mode=ro", uri=True, timeout=1)) as conn:
                return bool(conn.execute("SELECT 1 FROM banks WHERE kind = 'staging'").fetchall())
        except sqlite3.Error:
            return False

    tally = clean(
        command_run(run, "retain-document", signal.SIGKILL, at=staging, variant="jsonl", lines=300)
    )
    assert tally.faults == 1, tally.notes


def test_kill_9_of_the_mcp_server_loses_no_answered_retain(suite):
    """The server killed while the client's next retain is on its way: every retain it
    answered ok is in the store."""
    run = new_run(suite, "kill9:mcp-retain")
    tally = clean(command_run(run, "mcp-retain", signal.SIGKILL, at=5))
    assert tally.faults == 1 and tally.acked >= 5 + 1, tally.notes


def test_cli_mcp_and_foreign_sqlite_clients_write_at_once(suite):
    tally = clean(concurrent_run(new_run(suite, "concurrent"), seconds=3, races=["corrections"]))
    assert tally.acked > 10 and tally.faults > 5, tally.notes


def test_retain_onto_a_full_disk_loses_nothing_acknowledged(tmp_path):
    """Batches of 200 until the disk (a tmpfs just larger than the store, or RLIMIT_FSIZE)
    is full: each refusal is one line saying so, every acknowledged batch is there, a
    refused batch kept whole batches of 64 and says how many; reads still answer."""
    first = tmp_path / "first" / "mem.db"
    done = run_argv(mem_argv(first, "retain", "The first note on a small disk."))
    assert done.returncode == 0, done.stderr
    size = first.stat().st_size
    # Room for a few batches: the tmpfs also holds the -wal and the -shm.
    with full_disk(tmp_path, FULL_DISK, size + (224 << 10)) as (folder, fsize):
        db = folder / "mem.db"
        shutil.copy2(first, db)
        limit = None if fsize is None else size + (96 << 10)
        acked, refused = [], []
        for k in range(40):
            rows = jsonl_rows(random.Random(k), f"k{k}-", 200)
            path = write_jsonl(tmp_path / f"k{k}.jsonl", rows)
            done = run_argv(mem_argv(db, "retain", "--jsonl", str(path), fsize=limit))
            no_traceback(done)
            if done.returncode == 0:
                acked.append(k)
                continue
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and "disk full" in lines[0], done.stderr
            refused.append((k, lines[0]))
            if len(refused) == 2:
                break
        assert refused, "the disk never filled"
        for args in (["export"], ["list"], ["banks"]):
            done = run_argv(mem_argv(db, *args, fsize=limit))
            assert done.returncode == 0, (args, done.stderr)
        (folder / ".filler").unlink(missing_ok=True)
        with closing(sqlite3.connect(db)) as check:
            assert check.execute("pragma integrity_check").fetchone() == ("ok",)
            for k in acked:
                got = check.execute(
                    "SELECT count(*) FROM facts WHERE source_id LIKE ?", (f"k{k}-%",)
                ).fetchone()[0]
                assert got == 200, (k, got)
            for k, line in refused:
                got = check.execute(
                    "SELECT count(*) FROM facts WHERE source_id LIKE ?", (f"k{k}-%",)
                ).fetchone()[0]
                assert got % 64 == 0 and got < 200, (k, got, line)
                said = f"the {got} items of the batches before it stay stored"
                assert (said in line) if got else ("nothing was written" in line), line
        done = run_argv(mem_argv(db, "doctor"))
        assert done.returncode == 0, done.stdout


def test_doctor_on_a_full_disk_checks_the_store_and_names_the_disk(tmp_path):
    """doctor on a full disk said only "FAIL store: disk full: cannot open ...": the store's
    own checks did not run, though the store can be read. They run (read-only) and one
    check names the full disk."""
    with full_disk(tmp_path, FULL_DISK) as (folder, fsize):
        db = folder / "mem.db"
        assert mem(db, "retain", "Maya flew to Lisbon on May 9.").returncode == 0
        if fsize is None:
            fill(folder)
        done = run_argv(mem_argv(db, "doctor", fsize=fsize))
        no_traceback(done)
        failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
        assert len(failed) == 1 and "is full" in failed[0], done.stdout
        assert "OK    sqlite quick_check" in done.stdout, done.stdout
        assert "OK    facts = FTS rows = vectors: 1 facts" in done.stdout, done.stdout
        assert done.returncode == 1


# -- Ctrl-C that arrives while a transaction commits -------------------------------------------


def ctrl_c_at_commit(store: Store, number: int) -> None:
    """A real SIGINT to this process while the store's `number`th commit (counting from 1)
    is being written: Python raises the KeyboardInterrupt as the COMMIT call returns, the
    transaction being stored, as a Ctrl-C during a commit's fsync does."""
    commits = []
    # As in a fresh `mem` process: Python's own Ctrl-C handler, SIGINT not blocked (a test
    # before this one in the same process may have left another handler or mask).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    def hook(conn, name, pages):
        commits.append(pages)
        if len(commits) == number:
            os.kill(os.getpid(), signal.SIGINT)
        return 0  # SQLITE_OK

    store.core.conn.set_wal_hook(hook)


def test_ctrl_c_as_a_batch_commits_counts_the_batch_as_kept(store, embedder):
    """A Ctrl-C that came while the first batch of 64 committed: 64 items were stored, and
    the summary said "interrupted: kept 0 items, 0 facts stored" (the fault suite found it,
    sigint:retain-jsonl). A rerun of undated items without ids would store them twice."""
    items = [RetainItem(text=f"Line {i} of the garden notebook.") for i in range(100)]
    ctrl_c_at_commit(store, 1)
    summary = Retainer(store, "default", embedder).retain(items)
    stored = store.facts.fact_count()
    assert summary.interrupted and stored == 64
    assert (summary.items, summary.facts) == (64, 64), summary.line()


def test_ctrl_c_as_a_document_replace_commits_says_it_was_replaced(store, embedder):
    """A Ctrl-C while the new version of a document was swapped in: it is in the store,
    and the summary said its items were dropped ("kept 0 items") and no document replaced."""
    old = [RetainItem(text=f"Old line {i}.", document_id="notes") for i in range(3)]
    Retainer(store, "default", embedder).retain(old)
    new = [RetainItem(text=f"New line {i}.", document_id="notes") for i in range(5)]
    ctrl_c_at_commit(store, 2)  # the first commit stages the new version, the second swaps
    summary = Retainer(store, "default", embedder).retain(new)
    texts = set(store.facts.fact_texts(store.banks.bank_id("default")))
    assert texts == {f"New line {i}." for i in range(5)}
    assert summary.interrupted
    assert (summary.items, summary.documents_replaced) == (5, 1), summary.line()


def test_ctrl_c_as_a_reembed_swaps_its_vectors_in_says_it_is_done(store, embedder):
    """A Ctrl-C while reembed swapped the new vectors in: the bank is on the new model, and
    the report said it was interrupted, "the bank still uses its old vectors"."""
    from memcli import lifecycle
    from memcli.models.load import load_embedder

    Retainer(store, "default", embedder).retain(
        [RetainItem(text=f"Note {i} about the harbor ferry.") for i in range(6)]
    )
    e5 = load_embedder("e5")
    ctrl_c_at_commit(store, 3)  # the reembed's start, its one batch, the swap
    report = lifecycle.reembed(store, "default", e5)
    name, _ = store.vectors.bank_embedder(store.banks.bank_id("default"))
    assert name == e5.name
    assert not report.interrupted and report.embedded == 6, report
