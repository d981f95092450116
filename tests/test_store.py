"""The store's schema migrations and its speaker lookup, on a real database file."""

from __future__ import annotations

import json
import multiprocessing
from datetime import datetime, timedelta

import pytest

from memcli.retain import Retainer, RetainItem
from memcli.store import APPLICATION_ID, CONTEXTS_AMONG_SQL, SCHEMA_VERSION, Store
from memcli.store.schema import MIGRATIONS

DAY = datetime(2026, 6, 1)


def index_names(store: Store) -> set[str]:
    return {
        r[0] for r in store.core.conn.execute("SELECT name FROM sqlite_master WHERE type='index'")
    }


def _write_version_2_file(path, embedder) -> None:
    """A store exactly as mem's schema 2 wrote it: the shipped migration SQL, and rows the
    way the old retain inserted them (bank-wide content hashes, one embedder in meta)."""
    import apsw
    import sqlite_vec

    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute(MIGRATIONS[0])
    conn.execute(MIGRATIONS[1])
    conn.execute("PRAGMA user_version = 2")
    conn.execute(
        "CREATE VIRTUAL TABLE fact_vec USING vec0(fact_id INTEGER PRIMARY KEY, "
        "bank_id INTEGER PARTITION KEY, fact_type TEXT, embedding float[384] "
        "distance_metric=cosine)"
    )
    conn.execute(
        "INSERT INTO meta VALUES('embedder', ?), ('embedding_dim', '384')", (embedder.name,)
    )
    conn.execute("INSERT INTO banks(id, name, created_at) VALUES(1, 'default', '2026-01-01')")
    conn.execute(
        "INSERT INTO documents(id, bank_id, external_id, created_at) "
        "VALUES(1, 1, 'notes', '2026-01-01')"
    )
    texts = ["Sam moved to Lisbon.", "Sam works at the harbour."]
    for i, (text, vec) in enumerate(zip(texts, embedder.embed(texts)), start=1):
        conn.execute(
            "INSERT INTO facts(id, bank_id, text, context, fact_type, mentioned_at, "
            "event_time, content_hash, created_at, document_id) "
            "VALUES(?, 1, ?, 'Sam', 'world', '2026-06-01T00:00:00', '2026-06-01T00:00:00', "
            "?, '2026-06-01T00:00:00', 1)",
            (i, text, f"oldhash{i}"),
        )
        conn.execute(
            "INSERT INTO fact_fts(rowid, text, context, entities, lead_in) "
            "VALUES(?, ?, 'Sam', 'Sam', '')",
            (i, text),
        )
        conn.execute("INSERT INTO fact_vec VALUES(?, 1, 'world', ?)", (i, vec.tobytes()))
    conn.execute("INSERT INTO links VALUES(2, 1, 'semantic', 0.8)")
    conn.execute("INSERT INTO links VALUES(1, 2, 'temporal', 0.9)")
    conn.close()


def test_a_version_2_file_is_migrated_in_place_and_keeps_everything(db_path, embedder):
    _write_version_2_file(db_path, embedder)
    with Store(db_path) as store:
        assert store.schema_version() == SCHEMA_VERSION == 11
        assert store.vectors.has_sentence_table()  # schema 10: empty until a reembed
        assert store.vectors.has_sentence_bits()  # schema 11
        assert store.core.conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert {"facts_context", "facts_dedupe"} <= index_names(store)
        bank = store.banks.require_bank("default")
        facts = store.facts.facts_by_id([1, 2], bank)
        assert [facts[i].text for i in (1, 2)] == [
            "Sam moved to Lisbon.",
            "Sam works at the harbour.",
        ]
        assert facts[1].document_id == "notes" and facts[1].valid_from is not None
        # Schema 4: temporal links are read from the time index, no longer stored; the
        # vectors gain their sign bits, and a search finds the same nearest facts.
        assert store.links.link_count() == 1 and len(store.vectors.vectors_for([1, 2])) == 2
        assert store.vectors.has_vector_bits()
        vec = store.vectors.vectors_for([2])[2]
        assert [f for f, _ in store.vectors.nearest(bank, vec, 2)] == [2, 1]
        # Hashes are recomputed the new way, so re-retaining the same fact is a duplicate.
        assert "oldhash1" not in {
            r[0] for r in store.core.conn.execute("SELECT content_hash FROM facts")
        }
        assert store.vectors.bank_embedder(bank)[0] == embedder.name
    with Store(db_path) as store:
        summary = Retainer(store, "default", embedder).retain(
            [RetainItem("Sam moved to Lisbon.", context="Sam", timestamp=DAY, document_id="notes")]
        )
        assert store.facts.fact_count() == 1  # the document was replaced by its one-item version
        assert summary.documents_replaced == 1


def test_contexts_among_finds_the_speakers_a_query_names(store, remember):
    remember(
        [
            RetainItem("Back from the Alps.", context="Sam", timestamp=DAY),
            RetainItem("Welcome back!", context="Priya Nair", timestamp=DAY),
            RetainItem("Build is green.", context="C++ team", timestamp=DAY),
        ]
    )
    remember("Elsewhere.", bank="other", context="Tom", timestamp=DAY)
    bank = store.banks.require_bank("default")
    assert store.facts.contexts_among(bank, ["sam", "PRIYA NAIR", "c++ team", "Tom", "Alps"]) == [
        "C++ team",
        "Priya Nair",
        "Sam",
    ]
    assert store.facts.contexts_among(bank, ['"); DROP TABLE facts; --', "Priya"]) == []
    assert store.facts.contexts_among(bank, []) == []
    # The lookup is an index probe, not a scan of the bank.
    plan = " ".join(
        str(row)
        for row in store.core.conn.execute(
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
            assert store.core.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert outcomes == ["ok"] * 30


def test_every_foreign_key_has_an_index_on_its_child_columns(store):
    # Without one, each deleted parent row makes SQLite scan the whole child table (a
    # 156-fact forget in a 101k-fact store took 23 s); forget, document replace and bank
    # delete all delete parents.
    conn = store.core.conn
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
        )
    ]
    missing = []
    for table in tables:
        keys: dict[int, list[str]] = {}
        for row in conn.execute(f"PRAGMA foreign_key_list('{table}')"):
            keys.setdefault(row[0], []).append(row[3])
        if not keys:
            continue
        leading = set()
        for index in conn.execute(f"PRAGMA index_list('{table}')"):
            cols = [c[2] for c in conn.execute(f"PRAGMA index_info('{index[1]}')")]
            leading.add(tuple(cols))
        pk = tuple(
            r[1]
            for r in sorted(conn.execute(f"PRAGMA table_info('{table}')"), key=lambda r: r[5])
            if r[5]
        )
        leading.add(pk)
        for cols in keys.values():
            if not any(idx[: len(cols)] == tuple(cols) for idx in leading):
                missing.append(f"{table}({', '.join(cols)})")
    assert missing == [], missing


def test_facts_said_at_an_instant_are_found_by_the_window_as_instants(db_path, bare_fact):
    """A period is a span of the speaker's calendar and is checked against the window; a fact
    without one is dated by the UTC instant it was said and checked against `said`, the
    window as instants (hours apart: the zone's offset). Against that rule on random facts
    and windows of an hour to a month, offsets of -14 to +14 hours; fact_ids_in_window and
    in_window_among agree."""
    import random

    import numpy as np

    rng = random.Random(7)
    base = datetime(2026, 3, 1)
    hour = timedelta(hours=1)
    facts = []  # (said, start, end): start None for a fact dated by when it was said
    for _ in range(400):
        said = base + rng.randrange(0, 24 * 40) * hour
        if rng.random() < 0.5:
            facts.append((said, None, None))
        else:
            start = base + rng.randrange(0, 40) * 24 * hour
            end = start + rng.choice([24, 24 * 7, 24 * 30]) * hour if rng.random() < 0.7 else None
            facts.append((said, start, end))
    with Store(db_path) as store, store.atomic():
        bank = store.banks.ensure_bank("default", base)
        store.vectors.ensure_vectors(bank, "unit", None, 8)
        ids = [
            bare_fact(store, bank, i, np.eye(8, dtype=np.float32)[i % 8], said, start=s, end=e)
            for i, (said, s, e) in enumerate(facts)
        ]
    with Store(db_path) as store:
        for _ in range(60):
            w_start = base + rng.randrange(0, 24 * 40) * hour
            w_end = w_start + rng.choice([1, 6, 24, 24 * 7, 24 * 30]) * hour
            offset = rng.randrange(-14, 15) * hour
            said = (w_start + offset, w_end + offset)
            want = set()
            for fid, (at, start, end) in zip(ids, facts):
                if start is None:
                    inside = said[0] <= at < said[1]
                elif end is None:
                    inside = w_start <= start < w_end
                else:
                    inside = start < w_end and end > w_start
                if inside:
                    want.add(fid)
            got = store.search.fact_ids_in_window(bank, w_start, w_end, None, said)
            assert len(got) == len(set(got.tolist()))
            assert set(got.tolist()) == want, (w_start, w_end, offset)
            assert store.search.in_window_among(ids, w_start, w_end, None, said) == want


def test_facts_in_a_time_window_are_those_whose_period_overlaps_it(db_path, bare_fact):
    """fact_ids_in_window against the rule it implements, on periods before, across, inside
    and after windows, and points; each of its statements read through an index."""
    import numpy as np

    day = timedelta(days=1)
    base = datetime(2026, 3, 1)
    periods = [  # (start, end or None for a point)
        (base - 10 * day, base - 5 * day),  # ends before
        (base - 10 * day, base + 2 * day),  # across the window's start
        (base - 10 * day, base + 40 * day),  # around the whole window
        (base + 3 * day, None),  # a point inside
        (base + 3 * day, base + 4 * day),  # inside
        (base + 20 * day, base + 45 * day),  # across the window's end
        (base + 40 * day, None),  # a point after
        (base, None),  # a point at the start (inside: half-open)
        (base + 30 * day, None),  # a point at the end (outside)
        (base - 3 * day, base),  # ends at the start (outside: ends are exclusive)
        (base + 2 * day, base - 2 * day),  # said inside, of a period that ended before
    ]
    with Store(db_path) as store, store.atomic():
        bank = store.banks.ensure_bank("default", base)
        store.vectors.ensure_vectors(bank, "unit", None, 8)
        ids = []
        for i, (start, end) in enumerate(periods):
            ids.append(
                bare_fact(
                    store,
                    bank,
                    i,
                    np.eye(8, dtype=np.float32)[i % 8],
                    start,
                    start=start if end else None,
                    end=end,
                    now=base,
                )
            )
    with Store(db_path) as store:
        for w_start, w_end in [
            (base, base + 30 * day),
            (base + 35 * day, base + 50 * day),
            (base - 20 * day, base - 9 * day),
        ]:
            want = {
                fid
                for fid, (start, end) in zip(ids, periods)
                if start < w_end and ((end or start) > w_start if end else start >= w_start)
            }
            got = store.search.fact_ids_in_window(bank, w_start, w_end, None)
            assert sorted(got) == sorted(want), (w_start, w_end)
        # Every statement it runs reads facts through an index, never the whole table.
        statements: list[tuple[str, tuple]] = []

        def trace(cursor, sql, bindings):
            statements.append((sql, tuple(bindings or ())))
            return True

        store.core.conn.exec_trace = trace
        store.search.fact_ids_in_window(bank, base, base + 30 * day, None)
        store.core.conn.exec_trace = None
        plans = [
            " ".join(r[-1] for r in store.core.conn.execute("EXPLAIN QUERY PLAN " + q, args))
            for q, args in statements
        ]
        assert len(plans) == 3, plans
        assert all("SCAN" not in plan for plan in plans), plans
        assert "COVERING INDEX facts_event_time" in plans[0], plans
        assert all("facts_occurred_end" in plan for plan in plans[1:]), plans


@pytest.mark.parametrize(
    "case",
    [
        # (facts of the other bank, type filter, expected: the asked bank's best by BM25)
        ("no other bank", 0, None, [6, 5, 4]),
        ("another bank holds all the best matches", 40, None, [6, 5, 4]),
        ("a filter excludes the best matches", 0, ("experience",), [3, 2, 1]),
        ("both", 40, ("experience",), [3, 2, 1]),
    ],
    ids=lambda c: c[0],
)
def test_keyword_search_returns_the_banks_best_matches(db_path, bare_fact, case):
    """keyword_search ranks in FTS5 alone and checks the bank and filter afterwards; when
    another bank or a filter takes the best matches it must still return this bank's best,
    in BM25 order. Every text has six words, so BM25 orders by how often "apple" occurs."""
    from memcli.recall.filters import FactFilter

    _, others, types, expected = case
    with Store(db_path) as store, store.atomic():
        mine = store.banks.ensure_bank("mine", DAY)
        theirs = store.banks.ensure_bank("theirs", DAY)
        store.vectors.ensure_vectors(mine, "unit", None, 8)
        store.vectors.ensure_vectors(theirs, "unit", None, 8)
        vec = [1.0] * 8
        apples = {}
        for count in range(1, 7):
            text = " ".join(["apple"] * count + ["pear"] * (6 - count))
            kind = "world" if count >= 4 else "experience"
            apples[bare_fact(store, mine, count, vec, DAY, text=text, fact_type=kind)] = count
        for n in range(others):
            bare_fact(store, theirs, 100 + n, vec, DAY, text="apple " * 6)
    with Store(db_path) as store:
        rows = store.search.keyword_search(
            mine, ["apple"], (1.0, 0.5, 0.75, 0.3), FactFilter(types=types), limit=3
        )
    assert [apples.get(fid) for fid, _ in rows] == expected
    scores = [score for _, score in rows]
    assert scores == sorted(scores)  # bm25: lower is better


@pytest.mark.parametrize(
    "text",
    [
        'Quotes " and \\ backslashes, a tab\there and a newline\nthere.',
        "Control \x01\x1b[31m and a NUL \x00 inside.",
        "我家的猫叫豆豆，是一只橘猫。 🐈 café",
        '[1, 2] {"json": true} looks like JSON',
    ],
)
def test_facts_read_back_as_written_whatever_their_text(store, bare_fact, text):
    """facts_by_id reads each fact as one JSON row built by SQLite: every character comes
    back as it was stored, with its entity names, times and ids."""
    from datetime import datetime

    from memcli.store import Store

    at = datetime(2026, 3, 1, 9, 30)
    with store.atomic():
        bank = store.banks.ensure_bank("default", at)
        store.vectors.ensure_vectors(bank, "unit", None, 8)
        fid = store.facts.insert_fact(
            bank_id=bank,
            text=text,
            context='Ana "A" \\ Lee',
            fact_type="experience",
            mentioned_at=at,
            occurred_start=datetime(2026, 2, 1),
            occurred_end=datetime(2026, 3, 1),
            tags=["b", "a"],
            metadata={"k": [1, "x"], "nested": {"n": None}},
            source_id="src-1",
            document_id=None,
            chunk_id=None,
            content_hash="h-text",
            entity_names=["Zoë", "Ana Lee", "Ärger"],
            embedding=[0.5] * 8,
            now=at,
        )
        for name in ("Zoë", "Ana Lee", "Ärger"):
            store.entities.mention_entity(
                fid, store.entities.insert_entity(bank, name, at, [name.lower()]), at
            )
    fact = store.facts.facts_by_id([fid, fid, 10**9], bank)[fid]
    assert fact.text == text
    assert fact.context == 'Ana "A" \\ Lee'
    assert (fact.fact_type, fact.source_id, fact.tags) == ("experience", "src-1", ["b", "a"])
    assert fact.metadata == {"k": [1, "x"], "nested": {"n": None}}
    assert (fact.mentioned_at, fact.occurred_start, fact.occurred_end) == (
        at,
        datetime(2026, 2, 1),
        datetime(2026, 3, 1),
    )
    # names sorted as SQLite's BINARY collation sorts them
    assert fact.entities == sorted(["Zoë", "Ana Lee", "Ärger"])
    assert store.facts.facts_by_id([fid], bank + 1) == {}
    with Store(store.path, create=False) as other:
        assert other.facts.facts_by_id([fid])[fid] == fact


def test_entity_expansions_count_every_bank_and_list_the_banks_latest(store, bare_fact):
    """What the graph arm reads in one statement: for each entity, how many facts of any bank
    carry it, and its latest `limit` facts of the one bank, newest first; an entity no fact
    carries has (0, [])."""
    at = datetime(2026, 3, 1)
    with store.atomic():
        home = store.banks.ensure_bank("default", at)
        away = store.banks.ensure_bank("other", at)
        store.vectors.ensure_vectors(home, "unit", None, 8)
        store.vectors.ensure_vectors(away, "unit", None, 8)
        hub = store.entities.insert_entity(home, "Hub", at, ["hub"])
        rare = store.entities.insert_entity(home, "Rare", at, ["rare"])
        lonely = store.entities.insert_entity(home, "Lonely", at, ["lonely"])
        ours = [bare_fact(store, home, n, [0.1 * (n + 1)] * 8, at) for n in range(6)]
        theirs = [bare_fact(store, away, 10 + n, [0.2] * 8, at) for n in range(3)]
        for fid in ours + theirs:
            store.entities.mention_entity(fid, hub, at)
        store.entities.mention_entity(ours[2], rare, at)
    got = store.entities.entity_expansions([rare, hub, lonely, hub], home, 4)
    assert got == {
        rare: (1, [ours[2]]),
        hub: (9, sorted(ours, reverse=True)[:4]),
        lonely: (0, []),
    }
    for entity, (count, _) in got.items():
        assert count == store.entities.entity_fact_count(entity)
    assert store.entities.entity_expansions([], home, 4) == {}


def test_delete_facts_keeps_mention_counts_and_drops_unused_entities(store, bare_fact):
    """Deleting facts recounts the stored mention_count of each entity they mentioned (what
    entity lookup ranks by) and deletes, with their lookup keys, the entities no fact
    mentions any more."""
    at = datetime(2026, 3, 1)
    with store.atomic():
        bank = store.banks.ensure_bank("default", at)
        store.vectors.ensure_vectors(bank, "unit", None, 8)
        shared = store.entities.insert_entity(bank, "Shared", at, ["shared"])
        own = store.entities.insert_entity(bank, "Own", at, ["own"])
        kept, gone = (bare_fact(store, bank, n, [0.1 * (n + 1)] * 8, at) for n in range(2))
        for fid in (kept, gone):
            store.entities.mention_entity(fid, shared, at)
        store.entities.mention_entity(gone, own, at)
    q = store.core.conn.execute

    def mentions(eid: int) -> int | None:
        row = q("SELECT mention_count FROM entities WHERE id = ?", (eid,)).fetchone()
        return row[0] if row else None

    assert (mentions(shared), mentions(own)) == (2, 1)
    with store.atomic():
        counts = store.facts.delete_facts([gone])
    assert (counts["facts"], counts["entities"]) == (1, 1)
    assert (mentions(shared), mentions(own)) == (1, None)
    assert q("SELECT count(*) FROM entity_keys WHERE entity_id = ?", (own,)).fetchone()[0] == 0
