"""store.facts on PostgreSQL: facts written, read back, selected, closed and reopened by
corrections, and deleted from every table they live in (the rules of store/facts.py).

A new fact's id comes from the table's sequence: never given twice, whatever is forgotten or
rolled back (SQLite needs meta's fact_id_high for that; here it is only what an import asks
to keep past, folded into the sequence)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memcli import fts
from memcli.store.facts import _fact_from_row
from memcli.store.postgres.core import PgCore
from memcli.store.postgres.sql import (
    FACT_COLUMNS,
    document_length,
    document_params,
    document_sql,
    selection_sql,
)
from memcli.store.types import PAGE, Fact, iso, parse_iso, surviving_successor


class PgFacts:
    def __init__(self, core: PgCore, vectors: Any, entities: Any) -> None:
        self.core = core
        self.conn = core.conn
        self.vectors = vectors
        self.entities = entities

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
        indexed = (
            fts.index_text(text),
            fts.index_text(context or ""),
            fts.index_text(" ".join(entity_names)),
            fts.index_text(lead_in or ""),
        )
        # One round trip: the fact, its tags and its keyword row together.
        (fact_id,) = self.conn.execute(
            "WITH f AS (INSERT INTO facts(bank_id, text, context, fact_type, mentioned_at, "
            "occurred_start, occurred_end, event_time, tags, metadata, source_id, document_id, "
            "chunk_id, content_hash, created_at, valid_from, tail_tokens) VALUES(%s, %s, %s, "
            "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id), "
            "t AS (INSERT INTO fact_tags(fact_id, tag) SELECT f.id, tag FROM f, "
            "unnest(%s::text[]) AS tag ON CONFLICT DO NOTHING), "
            "x AS (INSERT INTO fact_fts(fact_id, text, context, entities, lead_in, doc, len) "
            f"SELECT f.id, %s, %s, %s, %s, {document_sql()}, %s FROM f) "
            "SELECT id FROM f",
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
                list(dict.fromkeys(tags)),
                *indexed,
                *document_params(*indexed),
                document_length(*indexed),
            ),
        ).fetchone()
        self.vectors.add_vector(fact_id, bank_id, fact_type, embedding)
        return fact_id

    def existing_hashes(
        self, bank_id: int, document_row: int | None, hashes: Iterable[str]
    ) -> set[str]:
        wanted = list(hashes)
        if not wanted:
            return set()
        return {
            r[0]
            for r in self.conn.execute(
                "SELECT content_hash FROM facts WHERE bank_id = %s "
                "AND coalesce(document_id, 0) = %s AND content_hash = ANY(%s)",
                (bank_id, document_row or 0, wanted),
            )
        }

    def facts_of_sources(
        self, bank_id: int, document_row: int | None, source_ids: Sequence[str]
    ) -> list[tuple[str, str, str | None, str]]:
        if not source_ids:
            return []
        return self.conn.execute(
            "SELECT source_id, text, context, fact_type FROM facts WHERE bank_id = %s "
            "AND coalesce(document_id, 0) = %s AND source_id = ANY(%s)",
            (bank_id, document_row or 0, list(source_ids)),
        ).fetchall()

    def delete_facts(self, fact_ids: Sequence[int]) -> dict[str, int]:
        """Remove facts from every table (their tags, keyword rows, vectors, entity rows and
        links cascade); entities left with no fact and chunks no fact uses go too. Counts of
        what went. Inside atomic()."""
        ids = sorted({int(i) for i in fact_ids})
        counts = {"facts": 0, "links": 0, "entities": 0, "chunks": 0}
        if not ids:
            return counts
        entity_ids = [
            r[0]
            for r in self.conn.execute(
                "SELECT DISTINCT entity_id FROM fact_entities WHERE fact_id = ANY(%s)", (ids,)
            )
        ]
        chunk_ids = [
            r[0]
            for r in self.conn.execute(
                "SELECT DISTINCT chunk_id FROM facts WHERE id = ANY(%s) AND chunk_id IS NOT NULL",
                (ids,),
            )
        ]
        counts["links"] = self.conn.execute(
            "SELECT (SELECT count(*) FROM links WHERE from_fact = ANY(%s)) + "
            "(SELECT count(*) FROM links WHERE to_fact = ANY(%s) AND NOT from_fact = ANY(%s))",
            (ids, ids, ids),
        ).fetchone()[0]
        counts["facts"] = self.conn.execute("DELETE FROM facts WHERE id = ANY(%s)", (ids,)).rowcount
        if entity_ids:
            self.conn.execute(
                "UPDATE entities e SET mention_count = (SELECT count(*) FROM fact_entities fe "
                "WHERE fe.entity_id = e.id) WHERE e.id = ANY(%s)",
                (entity_ids,),
            )
            counts["entities"] = self.conn.execute(
                "DELETE FROM entities WHERE id = ANY(%s) AND mention_count = 0", (entity_ids,)
            ).rowcount
        if chunk_ids:
            counts["chunks"] = self.conn.execute(
                "DELETE FROM chunks c WHERE c.id = ANY(%s) "
                "AND NOT EXISTS (SELECT 1 FROM facts f WHERE f.chunk_id = c.id)",
                (chunk_ids,),
            ).rowcount
        self.vectors.forget_deleted()
        return counts

    def facts_by_id(self, fact_ids: Sequence[int], bank_id: int | None = None) -> dict[int, Fact]:
        ids = sorted({int(i) for i in fact_ids})
        if not ids:
            return {}
        names: dict[int, list[str]] = {}
        for fid, name in self.conn.execute(
            "SELECT fe.fact_id, e.name FROM fact_entities fe JOIN entities e "
            "ON e.id = fe.entity_id WHERE fe.fact_id = ANY(%s)",
            (ids,),
        ):
            names.setdefault(fid, []).append(name)
        bank_cond = "" if bank_id is None else " AND f.bank_id = %s"
        bank_args = () if bank_id is None else (bank_id,)
        rows = self.conn.execute(
            f"SELECT {FACT_COLUMNS} FROM facts f LEFT JOIN documents d ON d.id = f.document_id "
            f"WHERE f.id = ANY(%s){bank_cond} ORDER BY f.id",
            (ids, *bank_args),
        ).fetchall()
        # Entity names in code point order, as SQLite's BINARY collation gives them.
        return {row[0]: _fact_from_row(row, sorted(names.get(row[0], ()))) for row in rows}

    def next_facts(self, fact_ids: Sequence[int], max_gap_hours: float) -> dict[int, int]:
        ids = sorted({int(i) for i in fact_ids})
        if not ids:
            return {}
        out: dict[int, int] = {}
        for fid, after, said, then in self.conn.execute(
            "SELECT f.id, n.id, f.mentioned_at, n.mentioned_at FROM facts f "
            "JOIN LATERAL (SELECT q.id, q.mentioned_at FROM facts q WHERE q.bank_id = f.bank_id "
            "AND q.document_id IS NOT DISTINCT FROM f.document_id AND q.id > f.id "
            "ORDER BY q.id LIMIT 1) n ON true WHERE f.id = ANY(%s)",
            (ids,),
        ):
            gap = (datetime.fromisoformat(then) - datetime.fromisoformat(said)).total_seconds()
            if 0 <= gap / 3600 <= max_gap_hours:
                out[fid] = after
        return out

    def fact_neighbourhoods(
        self, bank_id: int, fact_ids: Sequence[int], radius: int
    ) -> list[tuple[int, int | None, datetime]]:
        """Every fact of the bank within radius ids of a seed (a range probe of the primary
        key per seed), in id order."""
        ids = sorted({int(i) for i in fact_ids})
        if not ids or radius < 0:
            return []
        rows = self.conn.execute(
            "SELECT DISTINCT f.id, f.document_id, f.mentioned_at FROM unnest(%s::bigint[]) "
            "AS j(v) JOIN facts f ON f.id BETWEEN j.v - %s AND j.v + %s "
            "WHERE f.bank_id = %s ORDER BY f.id",
            (ids, int(radius), int(radius), bank_id),
        ).fetchall()
        return [(fid, doc, parse_iso(said)) for fid, doc, said in rows]

    def contexts_among(self, bank_id: int, candidates: Sequence[str]) -> list[str]:
        """The bank's contexts equal to a candidate ignoring case: one probe of the
        facts_context index per candidate, the first context at or after it in index order.
        (Asked for equality, the planner took a bank with two speakers for one where any
        row would do and read every fact for a candidate that names none: 66 ms at 10k
        facts, this way 0.3.)"""
        if not candidates:
            return []
        rows = self.conn.execute(
            "SELECT DISTINCT p.context FROM unnest(%s::text[]) AS c, LATERAL "
            "(SELECT f.context, lower(f.context) AS k FROM facts f WHERE f.bank_id = %s "
            "AND lower(f.context) >= lower(c) ORDER BY lower(f.context) LIMIT 1) AS p "
            "WHERE p.k = lower(c)",
            (list(candidates), bank_id),
        ).fetchall()
        return sorted(r[0] for r in rows)

    def fact_count(self, bank_id: int | None = None) -> int:
        if bank_id is None:
            return self.conn.execute(
                "SELECT count(*) FROM facts f JOIN banks b ON b.id = f.bank_id "
                "WHERE b.kind = 'user'"
            ).fetchone()[0]
        return self.conn.execute(
            "SELECT count(*) FROM facts WHERE bank_id = %s", (bank_id,)
        ).fetchone()[0]

    def fact_ids_of_bank(self, bank_id: int) -> list[int]:
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM facts WHERE bank_id = %s ORDER BY id", (bank_id,)
            )
        ]

    def source_ids(self, bank_id: int) -> dict[int, str | None]:
        return dict(
            self.conn.execute("SELECT id, source_id FROM facts WHERE bank_id = %s", (bank_id,))
        )

    def fact_texts(self, bank_id: int) -> list[str]:
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT text FROM facts WHERE bank_id = %s ORDER BY id", (bank_id,)
            )
        ]

    def iter_facts(
        self, bank_id: int, sel: Any, *, limit: int | None = None, offset: int = 0
    ) -> Iterator[Fact]:
        """The selected facts of a bank, newest said first (ties: newest recorded first),
        through a server-side cursor a page at a time (memory stays bounded)."""
        cond, params = selection_sql(sel, "f")
        sql = (
            f"SELECT {FACT_COLUMNS} FROM facts f LEFT JOIN documents d ON d.id = f.document_id "
            f"WHERE f.bank_id = %s{cond} ORDER BY f.mentioned_at DESC, f.id DESC "
            "LIMIT %s OFFSET %s"
        )
        args = (bank_id, *params, limit, offset)
        # A named cursor needs a transaction; outside one (a plain read) it gets its own.
        with self.core.snapshot():
            with self.conn.cursor(name=f"mem_list_{id(self)}") as cur:
                cur.itersize = PAGE
                cur.execute(sql, args)
                while True:
                    rows = cur.fetchmany(PAGE)
                    if not rows:
                        return
                    names = self.entities.entity_names_of([r[0] for r in rows])
                    for row in rows:
                        yield _fact_from_row(row, names.get(row[0], []))

    def selected_fact_ids(self, bank_id: int, sel: Any) -> list[int]:
        cond, params = selection_sql(sel, "f")
        return [
            r[0]
            for r in self.conn.execute(
                f"SELECT f.id FROM facts f WHERE f.bank_id = %s{cond} ORDER BY f.id",
                (bank_id, *params),
            )
        ]

    def missing_fact_ids(self, bank_id: int, ids: Sequence[int]) -> list[int]:
        wanted = [int(i) for i in ids]
        found = {
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM facts WHERE bank_id = %s AND id = ANY(%s)", (bank_id, wanted)
            )
        }
        return [i for i in ids if i not in found]

    # -- corrections ----------------------------------------------------------------------

    def close_fact(self, fact_id: int, invalid_at: datetime, superseded_by: int) -> bool:
        return (
            self.conn.execute(
                "UPDATE facts SET invalid_at = %s, superseded_by = %s WHERE id = %s "
                "AND invalid_at IS NULL AND superseded_by IS NULL",
                (iso(invalid_at), superseded_by, fact_id),
            ).rowcount
            == 1
        )

    def _closed_by_forgotten(
        self, fact_ids: Sequence[int], replacements: Mapping[int, int] | None = None
    ) -> list[tuple[int, int | None]]:
        """See store/facts.py: for each fact closed by one of fact_ids, its first successor
        that stays (or None)."""
        replacements = replacements or {}
        ids = [int(i) for i in fact_ids]
        forgotten = set(ids)
        successor: dict[int, int | None] = dict(
            self.conn.execute(
                "SELECT id, superseded_by FROM facts WHERE id = ANY(%s)", (ids,)
            ).fetchall()
        )
        out = []
        for fid, by in self.conn.execute(
            "SELECT id, superseded_by FROM facts WHERE superseded_by = ANY(%s) "
            "AND NOT id = ANY(%s) ORDER BY id",
            (ids, ids),
        ).fetchall():
            out.append((fid, surviving_successor(by, forgotten, successor, replacements)))
        return out

    def reopen_superseded(
        self, fact_ids: Sequence[int], replacements: Mapping[int, int] | None = None
    ) -> int:
        reopened = 0
        for fid, successor in self._closed_by_forgotten(fact_ids, replacements):
            if successor is None:
                self.conn.execute(
                    "UPDATE facts SET invalid_at = NULL, superseded_by = NULL WHERE id = %s",
                    (fid,),
                )
                reopened += 1
            else:
                self.conn.execute(
                    "UPDATE facts SET superseded_by = %s WHERE id = %s", (successor, fid)
                )
        return reopened

    def superseded_among(self, fact_ids: Sequence[int]) -> int:
        return sum(1 for _, successor in self._closed_by_forgotten(fact_ids) if successor is None)

    def facts_superseded_by(self, fact_id: int) -> list[int]:
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM facts WHERE superseded_by = %s ORDER BY id", (fact_id,)
            )
        ]
