"""store.exchange on PostgreSQL: a bank's rows as an export reads them and an import writes
them back, every id as given (the rules of store/exchange.py; the file is the same, so an
export from one backend imports into the other byte for byte).

Ids an import writes past a table's sequence move the sequence past them before the import
commits (before_commit), so the next row made here never takes an imported id."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from memcli import fts
from memcli.store.exchange import (
    EXPORT_COLUMNS,
    FACT_EXPORT_COLUMNS,
    SOURCE_COLUMNS,
    _column_value,
    export_record,
)
from memcli.store.postgres.core import PgCore, first_line
from memcli.store.postgres.sources import SOURCES_VERSION
from memcli.store.postgres.sql import document_length, document_params, document_sql
from memcli.store.types import PAGE, WriteRefused

_JSON_COLUMNS = {"tags", "metadata", "aliases"}
_TABLES = ("documents", "chunks", "entities", "facts")

_LIVE_MENTIONS = (
    "(SELECT count(*) FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id "
    "WHERE fe.entity_id = e.id AND f.bank_id = e.bank_id)"
)

# Every foreign key an import could leave pointing nowhere: (child table, column, parent).
_REFERENCES = (
    ("documents", "bank_id", "banks"),
    ("chunks", "bank_id", "banks"),
    ("chunks", "document_id", "documents"),
    ("facts", "bank_id", "banks"),
    ("facts", "document_id", "documents"),
    ("facts", "chunk_id", "chunks"),
    ("facts", "superseded_by", "facts"),
    ("entities", "bank_id", "banks"),
    ("fact_entities", "fact_id", "facts"),
    ("fact_entities", "entity_id", "entities"),
    ("entity_keys", "entity_id", "entities"),
    ("fact_tags", "fact_id", "facts"),
    ("links", "from_fact", "facts"),
    ("links", "to_fact", "facts"),
    ("fact_fts", "fact_id", "facts"),
)


def sequence_high(conn: Any, table: str) -> int:
    """The last id the table's sequence gave (0 before its first)."""
    (seq,) = conn.execute("SELECT pg_get_serial_sequence(%s, 'id')", (table,)).fetchone()
    row = conn.execute(f"SELECT last_value, is_called FROM {seq}").fetchone()
    return int(row[0]) if row[1] else 0


class PgExchange:
    def __init__(self, core: PgCore, vectors: Any) -> None:
        self.core = core
        self.conn = core.conn
        self.vectors = vectors
        self._imported_high: dict[str, int] = {}

    # -- export -----------------------------------------------------------------------------

    def bank_id_ranges(self, bank_id: int) -> dict[str, list[int] | None]:
        out: dict[str, list[int] | None] = {}
        for table in _TABLES:
            lo, hi = self.conn.execute(
                f"SELECT min(id), max(id) FROM {table} WHERE bank_id = %s", (bank_id,)
            ).fetchone()
            out[table] = None if lo is None else [lo, hi]
        return out

    def export_counts(self, bank_id: int) -> dict[str, int]:
        out = {
            table: self.conn.execute(
                f"SELECT count(*) FROM {table} WHERE bank_id = %s", (bank_id,)
            ).fetchone()[0]
            for table in ("documents", "chunks", "facts")
        }
        out["entities"] = self.conn.execute(
            f"SELECT count(*) FROM entities e WHERE e.bank_id = %s AND {_LIVE_MENTIONS} > 0",
            (bank_id,),
        ).fetchone()[0]
        out["links"] = self.conn.execute(
            "SELECT count(*) FROM links l JOIN facts a ON a.id = l.from_fact "
            "JOIN facts b ON b.id = l.to_fact WHERE a.bank_id = %s AND b.bank_id = %s",
            (bank_id, bank_id),
        ).fetchone()[0]
        return out

    def export_rows(self, bank_id: int, table: str) -> Iterator[dict[str, Any]]:
        columns = EXPORT_COLUMNS[table]
        selected = ", ".join(columns)
        if table == "entities":
            selected = selected.replace("mention_count", _LIVE_MENTIONS)
        elif table == "documents" and self.core.version_at_open < SOURCES_VERSION:
            # A database opened at an older schema it could not upgrade: no sources known.
            selected = ", ".join("NULL" if c in SOURCE_COLUMNS else c for c in columns)
        last = -1
        while True:
            rows = self.conn.execute(
                f"SELECT {selected} FROM {table} e WHERE bank_id = %s AND id > %s "
                "ORDER BY id LIMIT %s",
                (bank_id, last, PAGE),
            ).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            keys: dict[int, list[str]] = {}
            if table == "entities":
                rows = [r for r in rows if r[-1] > 0]
                for eid, key in self.conn.execute(
                    "SELECT entity_id, key FROM entity_keys WHERE entity_id = ANY(%s) "
                    'ORDER BY entity_id, key COLLATE "C"',
                    ([r[0] for r in rows],),
                ):
                    keys.setdefault(eid, []).append(key)
            for row in rows:
                rec = export_record(columns, row)
                if table == "entities":
                    rec["keys"] = keys.get(row[0], [])
                yield rec

    def export_facts(self, bank_id: int, with_vectors: bool) -> Iterator[dict[str, Any]]:
        last = -1
        vectors = with_vectors and self.core.get_meta("embedding_dim") is not None
        n = len(FACT_EXPORT_COLUMNS)
        while True:
            rows = self.conn.execute(
                f"SELECT {', '.join('f.' + c for c in FACT_EXPORT_COLUMNS)}, "
                "x.entities, x.lead_in FROM facts f LEFT JOIN fact_fts x ON x.fact_id = f.id "
                "WHERE f.bank_id = %s AND f.id > %s ORDER BY f.id LIMIT %s",
                (bank_id, last, PAGE),
            ).fetchall()
            if not rows:
                return
            ids = [r[0] for r in rows]
            entity_ids: dict[int, list[int]] = {}
            for fid, eid in self.conn.execute(
                "SELECT fact_id, entity_id FROM fact_entities WHERE fact_id = ANY(%s) "
                "ORDER BY fact_id, entity_id",
                (ids,),
            ):
                entity_ids.setdefault(fid, []).append(eid)
            blobs: dict[int, bytes] = {}
            if vectors:
                for fid, vec in self.vectors.vectors_for(ids).items():
                    blobs[fid] = np.asarray(vec, dtype="<f4").tobytes()
                sentences = self.vectors.sentence_vectors(ids)
            for row in rows:
                rec = {c: _column_value(c, v) for c, v in zip(FACT_EXPORT_COLUMNS, row[:n])}
                rec["entities"] = entity_ids.get(row[0], [])
                rec["fts_entities"] = row[n]
                rec["fts_lead_in"] = row[n + 1]
                if vectors:
                    rec["vector"] = blobs.get(row[0])
                    if row[0] in sentences:
                        rec["sentence_vectors"] = np.asarray(
                            sentences[row[0]], dtype="<f4"
                        ).tobytes()
                yield rec
            last = rows[-1][0]

    def export_links(self, bank_id: int) -> Iterator[tuple[int, int, str, float]]:
        last = -1
        while True:
            ids = [
                r[0]
                for r in self.conn.execute(
                    "SELECT id FROM facts WHERE bank_id = %s AND id > %s ORDER BY id LIMIT %s",
                    (bank_id, last, PAGE),
                )
            ]
            if not ids:
                return
            yield from self.conn.execute(
                "SELECT l.from_fact, l.to_fact, l.kind, l.weight FROM links l "
                "JOIN facts b ON b.id = l.to_fact WHERE l.from_fact = ANY(%s) AND b.bank_id = %s "
                'ORDER BY l.from_fact, l.to_fact, l.kind COLLATE "C"',
                (ids, bank_id),
            ).fetchall()
            last = ids[-1]

    # -- import -----------------------------------------------------------------------------

    @contextmanager
    def refused_writes(self) -> Iterator[None]:
        """A row the server refuses (a constraint, a value of the wrong type) raises
        WriteRefused with the server's words; a lost connection stays a StoreError."""
        psycopg = self.core.psycopg
        try:
            yield
        except (psycopg.OperationalError, psycopg.InterfaceError):
            raise
        except (psycopg.errors.IntegrityError, psycopg.errors.DataError) as exc:
            raise WriteRefused(first_line(exc)) from exc

    def defer_foreign_keys(self) -> None:
        self.core.defer_foreign_keys()
        self._imported_high = {}
        self.core.before_commit(self._move_sequences)

    def _move_sequences(self) -> None:
        for table, high in self._imported_high.items():
            self.conn.execute(
                "SELECT setval(pg_get_serial_sequence(%s, 'id'), greatest(%s, "
                f"(SELECT coalesce(max(id), 0) FROM {table}), 1))",
                (table, high),
            )
        self._imported_high = {}

    def _imported(self, table: str, row_id: int) -> None:
        if row_id > self._imported_high.get(table, 0):
            self._imported_high[table] = row_id

    def ids_taken(self, table: str, lo: int, hi: int) -> bool:
        if lo <= sequence_high(self.conn, table):
            return True
        return (
            self.conn.execute(
                f"SELECT 1 FROM {table} WHERE id BETWEEN %s AND %s LIMIT 1", (lo, hi)
            ).fetchone()
            is not None
        )

    def max_id(self, table: str) -> int:
        used = self.conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0]
        return max(used, sequence_high(self.conn, table))

    def keep_fact_ids_past(self, high: int) -> None:
        self._imported("facts", int(high))

    def create_bank_row(self, name: str, created_at: str) -> int:
        return self.conn.execute(
            "INSERT INTO banks(name, created_at) VALUES(%s, %s) RETURNING id", (name, created_at)
        ).fetchone()[0]

    def import_document(
        self,
        bank_id: int,
        row_id: int,
        external_id: str,
        created: str,
        source_hash: str | None = None,
        sync_root: str | None = None,
    ) -> None:
        self.conn.execute(
            "INSERT INTO documents(id, bank_id, external_id, created_at, source_hash, "
            "sync_root) VALUES(%s, %s, %s, %s, %s, %s)",
            (row_id, bank_id, external_id, created, source_hash, sync_root),
        )
        self._imported("documents", row_id)

    def import_chunk(
        self, bank_id: int, row_id: int, document: int | None, source_id: str | None, text: str
    ) -> None:
        self.conn.execute(
            "INSERT INTO chunks(id, bank_id, document_id, source_id, text) "
            "VALUES(%s, %s, %s, %s, %s)",
            (row_id, bank_id, document, source_id, text),
        )
        self._imported("chunks", row_id)

    def import_entity(self, bank_id: int, row_id: int, rec: dict[str, Any]) -> None:
        self.conn.execute(
            "INSERT INTO entities(id, bank_id, name, aliases, first_seen, last_seen, "
            "mention_count) VALUES(%s, %s, %s, %s, %s, %s, %s)",
            (
                row_id,
                bank_id,
                rec["name"],
                json.dumps(rec["aliases"], ensure_ascii=False),
                rec["first_seen"],
                rec["last_seen"],
                rec["mention_count"],
            ),
        )
        if rec["keys"]:
            self.conn.execute(
                "INSERT INTO entity_keys(key, entity_id) SELECT k, %s FROM unnest(%s::text[]) k "
                "ON CONFLICT DO NOTHING",
                (row_id, list(rec["keys"])),
            )
        self._imported("entities", row_id)

    def import_fact(
        self,
        bank_id: int,
        rec: dict[str, Any],
        entity_ids: Sequence[int],
        embedding: bytes,
        tail_tokens: int | None = None,
    ) -> None:
        indexed = (
            fts.index_text(rec["text"]),
            fts.index_text(rec["context"] or ""),
            rec["fts_entities"] or "",
            rec["fts_lead_in"] or "",
        )
        values = [
            json.dumps(rec[c], ensure_ascii=False) if c in _JSON_COLUMNS else rec[c]
            for c in FACT_EXPORT_COLUMNS
        ]
        fid = rec["id"]
        marks = ", ".join(["%s"] * len(FACT_EXPORT_COLUMNS))
        self.conn.execute(
            f"WITH f AS (INSERT INTO facts(bank_id, {', '.join(FACT_EXPORT_COLUMNS)}, "
            f"tail_tokens) VALUES(%s, {marks}, %s) RETURNING id), "
            "t AS (INSERT INTO fact_tags(fact_id, tag) SELECT f.id, tag FROM f, "
            "unnest(%s::text[]) AS tag ON CONFLICT DO NOTHING), "
            "e AS (INSERT INTO fact_entities(fact_id, entity_id) SELECT f.id, e FROM f, "
            "unnest(%s::bigint[]) AS e) "
            "INSERT INTO fact_fts(fact_id, text, context, entities, lead_in, doc, len) "
            f"SELECT f.id, %s, %s, %s, %s, {document_sql()}, %s FROM f",
            (
                bank_id,
                *values,
                tail_tokens,
                list(dict.fromkeys(rec["tags"])),
                list(entity_ids),
                *indexed,
                *document_params(*indexed),
                document_length(*indexed),
            ),
        )
        # The fact's vector, then its sentences' (exchange._vector).
        dim = self.vectors.vector_dim() or len(embedding) // 4
        rows = np.frombuffer(embedding, dtype=np.float32).reshape(-1, dim)
        self.vectors.add_vector(fid, bank_id, rec["fact_type"], rows[0])
        if len(rows) > 1:
            self.vectors.add_sentence_vectors(fid, bank_id, rec["fact_type"], rows[1:])
        self._imported("facts", fid)

    def import_links(self, rows: Sequence[tuple[int, int, str, float]]) -> None:
        if not rows:
            return
        froms, tos, kinds, weights = (list(col) for col in zip(*rows))
        self.conn.execute(
            "INSERT INTO links(from_fact, to_fact, kind, weight) "
            "SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::float8[])",
            (froms, tos, kinds, weights),
        )

    def dangling_references(self) -> int:
        """Rows whose references point nowhere (checked before an import commits: the
        deferred foreign keys would refuse the commit, with less to say)."""
        total = 0
        for child, column, parent in _REFERENCES:
            total += self.conn.execute(
                f"SELECT count(*) FROM {child} c WHERE c.{column} IS NOT NULL AND NOT EXISTS "
                f"(SELECT 1 FROM {parent} p WHERE p.id = c.{column})"
            ).fetchone()[0]
        return total

    def correction_loops(self, bank_id: int) -> int:
        successor = dict(
            self.conn.execute(
                "SELECT id, superseded_by FROM facts WHERE bank_id = %s "
                "AND superseded_by IS NOT NULL",
                (bank_id,),
            ).fetchall()
        )
        done: set[int] = set()
        on_loops = 0
        for first in successor:
            path: dict[int, int] = {}
            at: int | None = first
            while at is not None and at not in done and at not in path:
                path[at] = len(path)
                at = successor.get(at)
            if at is not None and at in path:
                on_loops += len(path) - path[at]
            done.update(path)
        return on_loops
