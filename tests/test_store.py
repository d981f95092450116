"""The store's schema migrations and its speaker lookup, on a real database file."""

from __future__ import annotations

import json
import multiprocessing
from datetime import datetime

from memcli.retain import RetainItem
from memcli.store import CONTEXTS_AMONG_SQL, SCHEMA_VERSION, Store

DAY = datetime(2026, 6, 1)


def index_names(store: Store) -> set[str]:
    return {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}


def test_a_version_1_file_is_migrated_in_place_and_keeps_its_facts(db_path, store, remember):
    remember("Sam moved to Lisbon.", context="Sam", timestamp=DAY)
    # Make the file look as version 1 wrote it: no context index.
    store.conn.execute("DROP INDEX facts_context; PRAGMA user_version = 1")
    store.close()
    with Store(db_path) as again:
        assert again.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
        assert "facts_context" in index_names(again)
        assert again.fact_count() == 1


def test_contexts_among_finds_the_speakers_a_query_names(store, remember):
    remember(
        [
            RetainItem("Back from the Alps.", context="Sam", timestamp=DAY),
            RetainItem("Welcome back!", context="Priya Nair", timestamp=DAY),
            RetainItem("Build is green.", context="C++ team", timestamp=DAY),
        ]
    )
    remember("Elsewhere.", bank="other", context="Tom", timestamp=DAY)
    bank = store.require_bank("default")
    assert store.contexts_among(bank, ["sam", "PRIYA NAIR", "c++ team", "Tom", "Alps"]) == [
        "C++ team",
        "Priya Nair",
        "Sam",
    ]
    assert store.contexts_among(bank, ['"); DROP TABLE facts; --', "Priya"]) == []
    assert store.contexts_among(bank, []) == []
    # The lookup is an index probe, not a scan of the bank.
    plan = " ".join(
        str(row)
        for row in store.conn.execute(
            "EXPLAIN QUERY PLAN " + CONTEXTS_AMONG_SQL, (bank, json.dumps(["sam"]))
        )
    )
    assert "USING INDEX facts_context" in plan and "SCAN facts" not in plan


def _open_after(barrier, path: str, results) -> None:
    barrier.wait()
    try:
        Store(path).close()
        results.put("ok")
    except Exception as exc:  # report it, do not hang the parent
        results.put(f"{type(exc).__name__}: {exc}")


def test_processes_creating_one_new_file_at_once_all_succeed(tmp_path):
    # Switching a new file to WAL needs an exclusive lock, and SQLite does not wait for it on
    # the busy timeout: openers released together used to fail with "database is locked".
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    outcomes = []
    for trial in range(10):
        path = str(tmp_path / f"new{trial}.db")
        barrier = ctx.Barrier(3)
        procs = [ctx.Process(target=_open_after, args=(barrier, path, results)) for _ in range(3)]
        for p in procs:
            p.start()
        outcomes += [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(60)
        with Store(path) as store:
            assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert outcomes == ["ok"] * 30
