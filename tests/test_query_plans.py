"""Recall's reads must cost what they return, not what the store holds.

Every statement a recall runs is captured (on the main connection and on the readers the
arms open) and put through EXPLAIN QUERY PLAN on the same store. A plan that walks a whole
bank (a scan of facts, or an index searched on bank_id alone) grows with the store: that is
how fetching ~600 candidates by id once read all 30k facts of a bank (bank_id = ? took
facts_dedupe over the rowid lookup), 25 ms of a 100 ms warm query at 30k facts.
"""

from __future__ import annotations

import re

import apsw
import pytest

from memcli.recall.pipeline import recall
from memcli.recall.types import RecallOptions
from memcli.retain import RetainItem

WHOLE_BANK = [
    re.compile(r"\bSCAN (facts|f|q|p|entities|e|entity_keys|k|fact_entities|fe)\b"),
    re.compile(r"^SEARCH \w+ USING (COVERING )?INDEX \w+ \(bank_id=\?\)$"),
]

# Allowed to walk a bank: the bank's fact count (the graph arm's IDF), which the store
# keeps until the file changes (test_fact_count_is_kept_until_the_store_changes).
ALLOWED = [re.compile(r"^SELECT count\(\*\) FROM facts WHERE bank_id = \?$")]


@pytest.fixture
def traced(monkeypatch):
    """Every (sql, bindings) run on any connection opened from now on, plus `add(conn)`."""
    seen: list[tuple[str, tuple]] = []

    def tracer(cursor, sql, bindings):
        seen.append((sql, tuple(bindings) if bindings else ()))
        return True

    def hook(conn):
        conn.exec_trace = tracer

    monkeypatch.setattr(apsw, "connection_hooks", [*apsw.connection_hooks, hook])
    return seen, hook


def plans(path, seen, tables=("facts",)):
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    import sqlite_vec

    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    for sql, bindings in dict.fromkeys(seen):
        if not any(t in sql for t in tables) or not sql.lstrip().upper().startswith("SELECT"):
            continue
        rows = conn.execute("EXPLAIN QUERY PLAN " + sql, bindings).fetchall()
        yield sql, bindings, [row[-1] for row in rows]


def grow(remember, text, tags=lambda i: []) -> None:
    """Three imports of 60 items (text(part, i)) into the default bank: two speakers, five
    documents an import."""
    for part in range(3):
        remember(
            [
                RetainItem(
                    text=text(part, i),
                    context="alice" if i % 2 else "bob",
                    document_id=f"doc-{part}-{i % 5}",
                    tags=tags(i),
                )
                for i in range(60)
            ]
        )


@pytest.mark.parametrize(
    ("options", "query"),
    [
        (RecallOptions(), "when did Alice plan the launch with Bob?"),
        (
            RecallOptions(tags=["work"], types=["world", "experience"]),
            "when did Alice plan the launch with Bob?",
        ),
        (RecallOptions(budget="high", max_tokens=300), "when did Alice plan the launch with Bob?"),
        # a question about a time: the temporal arm's window and neighbours
        (RecallOptions(), "what did Alice plan with Bob in May 2026?"),
    ],
    ids=["default", "filtered", "high-budget", "time-window"],
)
def test_recall_reads_never_walk_a_bank(store, remember, db_path, embedder, traced, options, query):
    # A store grown by several imports, in two banks, with documents, tags and speakers.
    grow(
        remember,
        lambda part, i: (
            f"Note {part}-{i}: Alice met Bob at the cafe on Main Street about "
            f"project {i % 7}, and we planned the launch for May {1 + i % 28}."
        ),
        tags=lambda i: ["work"] if i % 3 else ["home"],
    )
    remember("Carol keeps her bike in the garage.", bank="other")
    seen, hook = traced
    hook(store.core.conn)
    result = recall(store, "default", query, options, embedder=embedder, settings=None)
    if "May" in query:
        assert result.time_window is not None and result.arms["temporal"].hits
    assert seen, "no statement was traced"
    assert not walks(db_path, seen), walks(db_path, seen)


def walks(db_path, seen, tables=("facts",), user_banks=None):
    """The statements whose plan walks a bank. With user_banks, one that binds none of
    them is skipped: it reads a retain call's own staging bank, which holds only what that
    call wrote."""
    return [
        (sql, plan)
        for sql, bindings, plan in plans(db_path, seen, tables)
        if any(p.search(step) for p in WHOLE_BANK for step in plan)
        and not any(a.search(sql) for a in ALLOWED)
        and (user_banks is None or set(bindings) & user_banks)
    ]


def test_retain_into_a_grown_store_never_walks_a_bank(store, remember, db_path, traced):
    """Resolving a name read every entity of the bank (entities_bank, added with the
    foreign-key indexes of schema 5, beat the key lookup): 11 ms a name at 30k facts, the
    reason retain got slower as the store grew."""
    grow(
        remember,
        lambda part, i: (
            f"Note {part}-{i}: Alice met Bob{i} and Carol{i % 9} at Cafe{i % 4} in "
            f"Lisbon about project {i % 7}."
        ),
    )
    seen, hook = traced
    hook(store.core.conn)
    remember(
        [
            RetainItem(text="Alice met Bob7 and Dmitri at Cafe2 in Lisbon.", document_id="n1"),
            RetainItem(text="Carol3 and Alicia flew to Porto with Bob.", context="bob"),
        ]
    )
    assert seen, "no statement was traced"
    tables = ("facts", "entities", "entity_keys", "fact_entities", "documents", "links")
    banks = {store.banks.require_bank("default")}
    assert not walks(db_path, seen, tables, banks), walks(db_path, seen, tables, banks)


def test_the_check_catches_a_bank_walk(store, remember, db_path):
    """The detector itself: the old facts_by_id statement is flagged."""
    remember("Alice met Bob at the cafe.")
    sql = "SELECT f.id FROM facts f WHERE f.id IN (?,?) AND f.bank_id = ?"
    [(_, _, plan)] = list(plans(db_path, [(sql, (1, 2, 1))]))
    assert any(p.search(step) for p in WHOLE_BANK for step in plan), plan


def test_fact_count_is_kept_until_the_store_changes(store, remember, db_path):
    from memcli.store import Store

    remember("Alice met Bob at the cafe.")
    bank = store.banks.require_bank("default")
    assert store.facts.fact_count(bank) == 1
    remember("Carol keeps her bike in the garage.")  # a write on this connection
    assert store.facts.fact_count(bank) == 2
    with Store(db_path) as other, other.atomic():  # a commit by another connection
        other.facts.delete_facts([max(other.facts.fact_ids_of_bank(bank))])
    assert store.facts.fact_count(bank) == 1
