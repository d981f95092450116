"""Facts: insert, read back, select, correct, delete everywhere they live.

Virtual tables (FTS5 and vec0) do not take part in foreign-key cascades, so every delete of
facts goes through `delete_facts`, which clears them, the entity counts and unused chunks too.

A selection (list, forget) is any object with the attributes of memcli.lifecycle.Selection
(ids, document, source_id, context, since, until, plus the recall filter's types, tags,
tags_match, valid_only and as_of); it becomes SQL here, with every user value a bound
parameter. A correction closes a fact's validity (close_fact) and taking a correction back
reopens what it closed (reopen_superseded).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from itertools import islice
from typing import Any

import numpy as np
import orjson

from memcli import fts
from memcli.store.core import StoreCore
from memcli.store.entities import EntitiesPart
from memcli.store.protocol import SelectionLike
from memcli.store.search import filter_sql
from memcli.store.types import (
    PAGE,
    Fact,
    batched,
    id_json,
    iso,
    marks,
    parse_iso,
    stored_json,
    surviving_successor,
)
from memcli.store.vectors import VectorsPart

# One probe of the facts_context index per candidate name (see contexts_among).
CONTEXTS_AMONG_SQL = (
    "SELECT DISTINCT (SELECT context FROM facts WHERE bank_id = ? "
    "AND lower(context) = lower(j.value) LIMIT 1) AS found "
    "FROM json_each(?) AS j WHERE found IS NOT NULL"
)

# A new fact's id: past every id in use and every id ever forgotten (schema 8: meta
# fact_id_high), so no id ever names two memories.
NEXT_FACT_ID = (
    "(SELECT max(coalesce((SELECT max(id) FROM facts), 0), coalesce((SELECT CAST(value AS "
    "INTEGER) FROM meta WHERE key = 'fact_id_high'), 0)) + 1)"
)

_FACT_COLUMNS = (
    "f.id, f.text, f.context, f.fact_type, f.mentioned_at, f.occurred_start, f.occurred_end, "
    "f.tags, f.metadata, f.proof_count, f.source_id, d.external_id, f.chunk_id, "
    "f.valid_from, f.invalid_at, f.superseded_by, f.created_at, f.tail_tokens"
)
# A file opened read-only is not upgraded: before schema 6 it has no tail_tokens.
_FACT_COLUMNS_V5 = _FACT_COLUMNS.replace("f.tail_tokens", "NULL")


def fact_columns(schema_version: int) -> str:
    """The columns _fact_from_row reads, for a file of this schema version."""
    return _FACT_COLUMNS if schema_version >= 6 else _FACT_COLUMNS_V5


def _fact_from_row(row: Sequence[Any], entities: list[str]) -> Fact:
    # Positional, in Fact's field order, and the times parsed inline: keyword arguments and
    # a parse_iso call per time took 1.7 ms for recall's ~700 candidates, this 0.55 ms.
    when = datetime.fromisoformat
    return Fact(
        row[0],  # id
        row[1],  # text
        row[2],  # context
        row[3],  # fact_type
        when(row[4]),  # mentioned_at
        when(row[5]) if row[5] else None,  # occurred_start
        when(row[6]) if row[6] else None,  # occurred_end
        # Most facts have none: json.loads of every "{}" and "[]" was ~15% of reading
        # recall's ~400-600 candidates.
        [] if row[7] == "[]" else stored_json(row[7], list),  # tags
        {} if row[8] == "{}" else stored_json(row[8], dict),  # metadata
        row[9],  # proof_count
        row[10],  # source_id
        row[11],  # document_id
        row[12],  # chunk_id
        entities,
        when(row[13]) if row[13] else None,  # valid_from
        when(row[14]) if row[14] else None,  # invalid_at
        row[15],  # superseded_by
        when(row[16]) if row[16] else None,  # created_at
        row[17],  # tail_tokens
    )


def selection_sql(sel: SelectionLike, alias: str = "f") -> tuple[str, list]:
    """The condition (starting with AND, or empty) that a selection puts on facts."""
    parts: list[str] = []
    params: list = []
    if getattr(sel, "ids", None):
        ids = list(sel.ids)
        parts.append(f"{alias}.id IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(ids))
    if getattr(sel, "document", None) is not None:
        parts.append(
            f"{alias}.document_id = (SELECT d.id FROM documents d "
            f"WHERE d.bank_id = {alias}.bank_id AND d.external_id = ?)"
        )
        params.append(sel.document)
    if getattr(sel, "source_id", None) is not None:
        parts.append(f"{alias}.source_id = ?")
        params.append(sel.source_id)
    if getattr(sel, "context", None) is not None:
        parts.append(f"lower({alias}.context) = lower(?)")
        params.append(sel.context)
    if getattr(sel, "since", None) is not None:
        parts.append(f"{alias}.mentioned_at >= ?")
        params.append(iso(sel.since))
    if getattr(sel, "until", None) is not None:
        parts.append(f"{alias}.mentioned_at < ?")
        params.append(iso(sel.until))
    cond = (" AND " + " AND ".join(parts)) if parts else ""
    more, more_params = filter_sql(sel, alias)
    return cond + more, params + more_params


class FactsPart:
    """store.facts: facts written, read back, selected, closed and reopened by corrections,
    and deleted from every table they live in."""

    def __init__(self, core: StoreCore, vectors: VectorsPart, entities: EntitiesPart) -> None:
        self.core = core
        self.conn = core.conn
        self.vectors = vectors
        self.entities = entities
        # Facts per bank (None: all user banks), kept until the file changes (fact_count).
        self._counts: dict[int | None, tuple[tuple[int, int], int]] = {}

    def insert_fact(
        self,
        *,
        bank_id: int,
        text: str,
        context: str | None,
        fact_type: str,
        mentioned_at: datetime,
        occurred_start: datetime | None,
        occurred_end: datetime | None,
        tags: list[str],
        metadata: dict[str, Any],
        source_id: str | None,
        document_id: int | None,
        chunk_id: int | None,
        content_hash: str,
        entity_names: list[str],
        embedding: np.ndarray,
        now: datetime,
        tail_tokens: int | None = None,
        lead_in: str | None = None,
        valid_from: datetime | None = None,
    ) -> int:
        event_time = occurred_start or mentioned_at
        self.conn.execute(
            "INSERT INTO facts(id, bank_id, text, context, fact_type, mentioned_at, "
            "occurred_start, occurred_end, event_time, tags, metadata, source_id, document_id, "
            f"chunk_id, content_hash, created_at, valid_from, tail_tokens) VALUES({NEXT_FACT_ID}, "
            "?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                bank_id,
                text,
                context,
                fact_type,
                iso(mentioned_at),
                iso(occurred_start),
                iso(occurred_end),
                iso(event_time),
                json.dumps(tags, ensure_ascii=False),
                json.dumps(metadata, ensure_ascii=False),
                source_id,
                document_id,
                chunk_id,
                content_hash,
                iso(now),
                iso(valid_from or mentioned_at),
                tail_tokens,
            ),
        )
        fact_id = self.conn.last_insert_rowid()
        self.conn.executemany(
            "INSERT OR IGNORE INTO fact_tags(fact_id, tag) VALUES(?, ?)",
            [(fact_id, t) for t in tags],
        )
        self.conn.execute(
            "INSERT INTO fact_fts(rowid, text, context, entities, lead_in) VALUES(?, ?, ?, ?, ?)",
            (
                fact_id,
                fts.index_text(text),
                fts.index_text(context or ""),
                fts.index_text(" ".join(entity_names)),
                fts.index_text(lead_in or ""),
            ),
        )
        self.vectors.add_vector(fact_id, bank_id, fact_type, embedding)
        return fact_id

    def existing_hashes(
        self, bank_id: int, document_row: int | None, hashes: Iterable[str]
    ) -> set[str]:
        """Which of `hashes` the document (or, for None, the bank's facts of no document)
        already holds."""
        found: set[str] = set()
        for batch in batched(list(hashes)):
            found.update(
                r[0]
                for r in self.conn.execute(
                    "SELECT content_hash FROM facts WHERE bank_id = ? "
                    f"AND coalesce(document_id, 0) = ? AND content_hash IN ({marks(len(batch))})",
                    (bank_id, document_row or 0, *batch),
                )
            )
        return found

    def facts_of_sources(
        self, bank_id: int, document_row: int | None, source_ids: Sequence[str]
    ) -> list[tuple[str, str, str | None, str]]:
        """(source id, text, context, fact type) of the facts the document (or, for None,
        the bank's facts of no document) holds from these input ids."""
        if not source_ids:
            return []
        return self.conn.execute(
            "SELECT source_id, text, context, fact_type FROM facts WHERE bank_id = ? "
            "AND coalesce(document_id, 0) = ? "
            "AND source_id IN (SELECT value FROM json_each(?))",
            (bank_id, document_row or 0, json.dumps(list(source_ids))),
        ).fetchall()

    def delete_facts(self, fact_ids: Sequence[int]) -> dict[str, int]:
        """Remove facts from every table; entities left with no fact and chunks no fact uses
        go too. Returns counts of what was removed. Call inside atomic()."""
        ids = list(fact_ids)
        counts = {"facts": 0, "links": 0, "entities": 0, "chunks": 0}
        if not ids:
            return counts
        entity_ids: set[int] = set()
        chunk_ids: set[int] = set()
        for batch in batched(ids):
            m = marks(len(batch))
            entity_ids.update(
                r[0]
                for r in self.conn.execute(
                    f"SELECT entity_id FROM fact_entities WHERE fact_id IN ({m})", batch
                )
            )
            chunk_ids.update(
                r[0]
                for r in self.conn.execute(
                    f"SELECT chunk_id FROM facts WHERE id IN ({m}) AND chunk_id IS NOT NULL",
                    batch,
                )
            )
            counts["links"] += self.conn.execute(
                f"SELECT (SELECT count(*) FROM links WHERE from_fact IN ({m})) + "
                f"(SELECT count(*) FROM links WHERE to_fact IN ({m}) "
                f"AND from_fact NOT IN ({m}))",
                (*batch, *batch, *batch),
            ).fetchone()[0]
            self.conn.execute(f"DELETE FROM fact_fts WHERE rowid IN ({m})", batch)
            self.vectors.delete_vectors(batch)
            self.conn.execute(f"DELETE FROM facts WHERE id IN ({m})", batch)
            counts["facts"] += self.conn.changes()
        for batch in batched(sorted(entity_ids)):
            m = marks(len(batch))
            self.conn.execute(
                "UPDATE entities SET mention_count = (SELECT count(*) FROM fact_entities fe "
                f"WHERE fe.entity_id = entities.id) WHERE id IN ({m})",
                batch,
            )
            self.conn.execute(
                f"DELETE FROM entities WHERE id IN ({m}) AND mention_count = 0", batch
            )
            counts["entities"] += self.conn.changes()
        for batch in batched(sorted(chunk_ids)):
            m = marks(len(batch))
            self.conn.execute(
                f"DELETE FROM chunks WHERE id IN ({m}) "
                "AND NOT EXISTS (SELECT 1 FROM facts f WHERE f.chunk_id = chunks.id)",
                batch,
            )
            counts["chunks"] += self.conn.changes()
        return counts

    def facts_by_id(self, fact_ids: Sequence[int], bank_id: int | None = None) -> dict[int, Fact]:
        """The facts with these ids (of one bank, when given), with their entity names, in
        id order.

        Each read returns one row, a JSON array built by SQLite: apsw hands the GIL back at
        every row it steps, so reading 700 facts a row each beside another thread of recall
        (pipeline.py) passed the GIL back and forth 1,400 times (5.1 ms alone, 13.4 ms beside
        a second reader; as one row, 5.1 and 5.4)."""
        ids = id_json(sorted(set(fact_ids)))
        names: dict[int, list[str]] = {}
        (found,) = self.conn.execute(
            "SELECT json_group_array(json_array(fe.fact_id, e.name)) FROM json_each(?) AS j "
            "JOIN fact_entities fe ON fe.fact_id = j.value JOIN entities e ON e.id = fe.entity_id",
            (ids,),
        ).fetchone()
        # orjson: half json's time for the ~700 candidates' rows of a recall.
        for fid, name in orjson.loads(found):
            names.setdefault(fid, []).append(name)
        # "+": the bank is checked on each row found by id, never used to pick an index (the
        # planner would otherwise search facts_dedupe by bank_id, reading the whole bank).
        bank_cond = "" if bank_id is None else " WHERE +f.bank_id = ?"
        bank_args = () if bank_id is None else (bank_id,)
        (rows,) = self.conn.execute(
            f"SELECT json_group_array(json_array({fact_columns(self.core.version_at_open)})) "
            "FROM json_each(?) AS j JOIN facts f ON f.id = j.value "
            f"LEFT JOIN documents d ON d.id = f.document_id{bank_cond}",
            (ids, *bank_args),
        ).fetchone()
        # Entity names in the order SQLite's BINARY collation sorts them (UTF-8 bytes, that
        # is code points, as Python sorts str).
        return {
            row[0]: _fact_from_row(row, sorted(names.get(row[0], ()))) for row in orjson.loads(rows)
        }

    def next_facts(self, fact_ids: Sequence[int], max_gap_hours: float) -> dict[int, int]:
        """For each fact, the fact stored just after it in the same bank and document (the
        nearest higher id), if it was said at most max_gap_hours later."""
        out: dict[int, int] = {}
        for batch in batched(list(fact_ids)):
            for fid, after, gap in self.conn.execute(
                "SELECT f.id, n.id, julianday(n.mentioned_at) - julianday(f.mentioned_at) "
                "FROM facts f JOIN facts n ON n.id = (SELECT q.id FROM facts q WHERE "
                "q.bank_id = f.bank_id AND q.document_id IS f.document_id AND q.id > f.id "
                f"ORDER BY q.id LIMIT 1) WHERE f.id IN ({marks(len(batch))})",
                batch,
            ):
                if 0 <= gap * 24 <= max_gap_hours:
                    out[fid] = after
        return out

    def fact_neighbourhoods(
        self, bank_id: int, fact_ids: Sequence[int], radius: int
    ) -> list[tuple[int, int | None, datetime]]:
        """Every fact of the bank whose id is within `radius` of one of fact_ids, as (id,
        document row, said at), in id order: the neighbours of each in its conversation (a
        retain call stores items in order, so within one bank and document consecutive ids
        are consecutive things said; the document arm reads them). One statement, a range
        probe of the primary key per seed: no table of its own to go stale."""
        if not fact_ids or radius < 0:
            return []
        rows = self.conn.execute(
            # CROSS JOIN keeps the seeds outside and +bank_id keeps the bank's index out: a
            # range of the primary key per seed (SQLite otherwise walked the bank per seed).
            "SELECT DISTINCT f.id, f.document_id, f.mentioned_at FROM json_each(?) AS j "
            "CROSS JOIN facts f ON f.id BETWEEN j.value - ? AND j.value + ? "
            "WHERE +f.bank_id = ? ORDER BY f.id",
            (id_json(fact_ids), int(radius), int(radius), bank_id),
        ).fetchall()
        return [(fid, doc, parse_iso(said)) for fid, doc, said in rows]

    def contexts_among(self, bank_id: int, candidates: Sequence[str]) -> list[str]:
        """The contexts (who said it, where it came from) of one bank that equal one of
        `candidates`, ignoring ASCII case: one index probe per candidate, never a scan."""
        rows = self.conn.execute(CONTEXTS_AMONG_SQL, (bank_id, json.dumps(list(candidates))))
        return sorted(row[0] for row in rows)

    def fact_count(self, bank_id: int | None = None) -> int:
        """Facts in one bank (or in all user banks). A count walks the bank's index, so it is
        kept until the file changes: PRAGMA data_version moves when another connection
        commits, total_changes() when this one writes."""
        version = (
            self.conn.execute("PRAGMA data_version").fetchone()[0],
            self.conn.total_changes(),
        )
        cache = self._counts
        hit = cache.get(bank_id)
        if hit is not None and hit[0] == version:
            return hit[1]
        if bank_id is None:
            n = self.conn.execute(
                "SELECT count(*) FROM facts f JOIN banks b ON b.id = f.bank_id "
                "WHERE b.kind = 'user'"
            ).fetchone()[0]
        else:
            n = self.conn.execute(
                "SELECT count(*) FROM facts WHERE bank_id = ?", (bank_id,)
            ).fetchone()[0]
        cache[bank_id] = (version, n)
        return n

    def fact_ids_of_bank(self, bank_id: int) -> list[int]:
        return [
            r[0] for r in self.conn.execute("SELECT id FROM facts WHERE bank_id = ?", (bank_id,))
        ]

    def source_ids(self, bank_id: int) -> dict[int, str | None]:
        """fact id -> the caller's id of the input item it came from (bench scoring)."""
        return dict(
            self.conn.execute("SELECT id, source_id FROM facts WHERE bank_id = ?", (bank_id,))
        )

    def fact_texts(self, bank_id: int) -> list[str]:
        return [
            r[0] for r in self.conn.execute("SELECT text FROM facts WHERE bank_id = ?", (bank_id,))
        ]

    # -- list / select --------------------------------------------------------------------

    def iter_facts(
        self, bank_id: int, sel: SelectionLike, *, limit: int | None = None, offset: int = 0
    ) -> Iterator[Fact]:
        """The selected facts of a bank, newest said first (ties: newest recorded first).

        One query streamed through its cursor (SQLite's sorter spills to temporary files, so
        memory stays bounded at any size), read a page at a time to fetch entity names."""
        cond, params = selection_sql(sel, "f")
        rows_iter = self.conn.cursor().execute(
            f"SELECT {fact_columns(self.core.version_at_open)} FROM facts f "
            "LEFT JOIN documents d ON d.id = f.document_id "
            f"WHERE f.bank_id = ?{cond} "
            "ORDER BY f.mentioned_at DESC, f.id DESC LIMIT ? OFFSET ?",
            (bank_id, *params, -1 if limit is None else limit, offset),
        )
        while True:
            rows = list(islice(rows_iter, PAGE))
            if not rows:
                return
            names = self.entities.entity_names_of([r[0] for r in rows])
            for row in rows:
                yield _fact_from_row(row, names.get(row[0], []))

    def selected_fact_ids(self, bank_id: int, sel: SelectionLike) -> list[int]:
        cond, params = selection_sql(sel, "f")
        return [
            r[0]
            for r in self.conn.execute(
                f"SELECT f.id FROM facts f WHERE f.bank_id = ?{cond} ORDER BY f.id",
                (bank_id, *params),
            )
        ]

    def missing_fact_ids(self, bank_id: int, ids: Sequence[int]) -> list[int]:
        """Which of ids are not facts of the bank."""
        found: set[int] = set()
        for batch in batched(list(ids)):
            found.update(
                r[0]
                for r in self.conn.execute(
                    f"SELECT id FROM facts WHERE +bank_id = ? AND id IN ({marks(len(batch))})",
                    (bank_id, *batch),
                )
            )
        return [i for i in ids if i not in found]

    # -- corrections: validity closed and reopened -------------------------------------

    def close_fact(self, fact_id: int, invalid_at: datetime, superseded_by: int) -> bool:
        """End a fact's validity (it stays stored and visible to --as-of), if it is still
        valid; whether it was. Inside atomic(): the check and the change are one statement
        under the write lock, so of two corrections of one fact at once only one closes it."""
        self.conn.execute(
            "UPDATE facts SET invalid_at = ?, superseded_by = ? WHERE id = ? "
            "AND invalid_at IS NULL AND superseded_by IS NULL",
            (iso(invalid_at), superseded_by, fact_id),
        )
        return self.conn.changes() == 1

    def _closed_by_forgotten(
        self, fact_ids: Sequence[int], replacements: Mapping[int, int] | None = None
    ) -> list[tuple[int, int | None]]:
        """For each fact (outside fact_ids) closed by one of fact_ids: (its id, the first
        successor along its correction chain that is not being forgotten, or None). A chain
        A -> B -> C with B forgotten gives (A, C): C still corrects A. A forgotten fact with
        a replacement (the same content in a document's new version) hands on to it."""
        replacements = replacements or {}
        ids = json.dumps(list(fact_ids))
        forgotten = set(fact_ids)
        successor: dict[int, int | None] = dict(
            self.conn.execute(
                "SELECT id, superseded_by FROM facts WHERE id IN (SELECT value FROM json_each(?))",
                (ids,),
            ).fetchall()
        )
        out = []
        for fid, by in self.conn.execute(
            "SELECT id, superseded_by FROM facts WHERE superseded_by IN "
            "(SELECT value FROM json_each(?)) AND id NOT IN (SELECT value FROM json_each(?))",
            (ids, ids),
        ).fetchall():
            out.append((fid, surviving_successor(by, forgotten, successor, replacements)))
        return out

    def reopen_superseded(
        self, fact_ids: Sequence[int], replacements: Mapping[int, int] | None = None
    ) -> int:
        """Facts closed by one of fact_ids (and not among them) become valid again: taking a
        correction back restores what it corrected. Unless that correction was corrected in
        turn by a fact that stays, or is replaced (`replacements`: forgotten id -> the fact
        with its content in a document's new version): then they stay closed, by that fact,
        so one version is current. Returns how many became valid. Inside atomic()."""
        reopened = 0
        for fid, successor in self._closed_by_forgotten(fact_ids, replacements):
            if successor is None:
                self.conn.execute(
                    "UPDATE facts SET invalid_at = NULL, superseded_by = NULL WHERE id = ?",
                    (fid,),
                )
                reopened += 1
            else:
                self.conn.execute(
                    "UPDATE facts SET superseded_by = ? WHERE id = ?", (successor, fid)
                )
        return reopened

    def superseded_among(self, fact_ids: Sequence[int]) -> int:
        """How many facts (outside fact_ids) a forget of fact_ids would make valid again."""
        return sum(1 for _, successor in self._closed_by_forgotten(fact_ids) if successor is None)

    def facts_superseded_by(self, fact_id: int) -> list[int]:
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM facts WHERE superseded_by = ? ORDER BY id", (fact_id,)
            )
        ]
