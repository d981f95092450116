"""A bank's rows as an export reads them (every column, in id order, a page at a time) and
as an import writes them back (every id as given), with the checks an import makes before
it commits. memcli/exchange.py turns them into the JSONL file and back."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import apsw
import numpy as np

from memcli import fts
from memcli.store.core import StoreCore
from memcli.store.sources import SOURCES_VERSION
from memcli.store.types import PAGE, WriteRefused, batched, marks, stored_json
from memcli.store.vectors import VectorsPart

# Export columns of each table, in file order. A fact's event_time and content_hash are
# exported too: they are derived at retain time by code that may change, so an import must
# not recompute them.
FACT_EXPORT_COLUMNS = (
    "id",
    "text",
    "context",
    "fact_type",
    "mentioned_at",
    "occurred_start",
    "occurred_end",
    "event_time",
    "tags",
    "metadata",
    "proof_count",
    "source_id",
    "document_id",
    "chunk_id",
    "content_hash",
    "created_at",
    "valid_from",
    "invalid_at",
    "superseded_by",
)
_JSON_COLUMNS = {"tags": list, "metadata": dict, "aliases": list}


def _column_value(column: str, value: Any) -> Any:
    """An exported column's value: JSON columns parsed (a fact's tags or metadata damaged by
    hand as none, as facts read them: doctor names such facts)."""
    kind = _JSON_COLUMNS.get(column)
    if kind is None:
        return value
    return json.loads(value) if column == "aliases" else stored_json(value, kind)


# The columns of the export's document, chunk and entity records, on either backend.
EXPORT_COLUMNS = {
    "documents": ("id", "external_id", "created_at", "source_hash", "sync_root"),
    "chunks": ("id", "document_id", "source_id", "text"),
    "entities": ("id", "name", "aliases", "first_seen", "last_seen", "mention_count"),
}
# Where a document came from (store/sources.py): in its record only when known, so that
# `mem sync` of the same folder goes on in the store an export is imported into.
SOURCE_COLUMNS = ("source_hash", "sync_root")


def export_record(columns: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
    """One exported row as its record: JSON columns parsed, unknown sources left out."""
    rec = {c: _column_value(c, v) for c, v in zip(columns, row)}
    for column in SOURCE_COLUMNS:
        if rec.get(column, 0) is None:
            del rec[column]
    return rec


# An entity's mentions by the facts of its own bank. A document replace in progress (or one
# killed before its publish, until the next writer purges it) has staged facts in a staging
# bank that already mention the live bank's entities, and may have added new ones there: an
# export carries neither those entities nor those mentions.
_LIVE_MENTIONS = (
    "(SELECT count(*) FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id "
    "WHERE fe.entity_id = e.id AND f.bank_id = e.bank_id)"
)


class ExchangePart:
    """store.exchange: export rows and import writes."""

    def __init__(self, core: StoreCore, vectors: VectorsPart) -> None:
        self.core = core
        self.conn = core.conn
        self.vectors = vectors

    # -- export ---------------------------------------------------------------------------

    def bank_id_ranges(self, bank_id: int) -> dict[str, list[int] | None]:
        """[min, max] id of each kind of row a bank owns (None when it has none)."""
        out: dict[str, list[int] | None] = {}
        for table in ("documents", "chunks", "entities", "facts"):
            lo, hi = self.conn.execute(
                f"SELECT min(id), max(id) FROM {table} WHERE bank_id = ?", (bank_id,)
            ).fetchone()
            out[table] = None if lo is None else [lo, hi]
        return out

    def export_counts(self, bank_id: int) -> dict[str, int]:
        """How many rows of each kind an export of the bank holds."""
        out = {
            table: self.conn.execute(
                f"SELECT count(*) FROM {table} WHERE bank_id = ?", (bank_id,)
            ).fetchone()[0]
            for table in ("documents", "chunks", "facts")
        }
        out["entities"] = self.conn.execute(
            f"SELECT count(*) FROM entities e WHERE e.bank_id = ? AND {_LIVE_MENTIONS} > 0",
            (bank_id,),
        ).fetchone()[0]
        # CROSS JOIN fixes the order (facts of the bank, their links by primary key, the
        # other end by id): without statistics SQLite may pair every fact with every fact.
        out["links"] = self.conn.execute(
            "SELECT count(*) FROM facts a CROSS JOIN links l ON l.from_fact = a.id "
            "CROSS JOIN facts b ON b.id = l.to_fact WHERE a.bank_id = ? AND b.bank_id = ?",
            (bank_id, bank_id),
        ).fetchone()[0]
        return out

    def export_rows(self, bank_id: int, table: str) -> Iterator[dict[str, Any]]:
        """The rows of documents, chunks or entities of a bank, by id, a page at a time."""
        columns = EXPORT_COLUMNS[table]
        selected = ", ".join(columns)
        if table == "entities":
            selected = selected.replace("mention_count", f"{_LIVE_MENTIONS}")
        elif table == "documents" and self.core.version_at_open < SOURCES_VERSION:
            # A file opened read-only at an older schema: no document's source is known.
            selected = ", ".join("NULL" if c in SOURCE_COLUMNS else c for c in columns)
        last = -1
        while True:
            rows = self.conn.execute(
                f"SELECT {selected} FROM {table} e WHERE +bank_id = ? AND id > ? "
                "ORDER BY id LIMIT ?",
                (bank_id, last, PAGE),
            ).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            if table == "entities":
                rows = [r for r in rows if r[-1] > 0]
            keys: dict[int, list[str]] = {}
            if table == "entities":
                for batch in batched([r[0] for r in rows]):
                    for eid, key in self.conn.execute(
                        "SELECT entity_id, key FROM entity_keys "
                        f"WHERE entity_id IN ({marks(len(batch))}) ORDER BY entity_id, key",
                        batch,
                    ):
                        keys.setdefault(eid, []).append(key)
            for row in rows:
                rec = export_record(columns, row)
                if table == "entities":
                    rec["keys"] = keys.get(row[0], [])
                yield rec

    def export_facts(self, bank_id: int, with_vectors: bool) -> Iterator[dict[str, Any]]:
        """Every fact of a bank by id: its columns, entity ids, the FTS columns that cannot
        be recomputed (entity spellings as extracted, the lead-in), and its vector blob."""
        last = -1
        vectors = with_vectors and self.core.get_meta("embedding_dim") is not None
        while True:
            rows = self.conn.execute(
                f"SELECT {', '.join('f.' + c for c in FACT_EXPORT_COLUMNS)}, "
                "x.entities, x.lead_in FROM facts f LEFT JOIN fact_fts x ON x.rowid = f.id "
                "WHERE +f.bank_id = ? AND f.id > ? ORDER BY f.id LIMIT ?",
                (bank_id, last, PAGE),
            ).fetchall()
            if not rows:
                return
            ids = [r[0] for r in rows]
            entity_ids: dict[int, list[int]] = {}
            for batch in batched(ids):
                for fid, eid in self.conn.execute(
                    "SELECT fact_id, entity_id FROM fact_entities "
                    f"WHERE fact_id IN ({marks(len(batch))}) ORDER BY fact_id, entity_id",
                    batch,
                ):
                    entity_ids.setdefault(fid, []).append(eid)
            blobs: dict[int, bytes] = {}
            if vectors:
                # Through store.vectors: it knows how the table stores them (float32, or half
                # precision beside sign bits); the file always holds float32.
                for fid, vec in self.vectors.vectors_for(ids).items():
                    blobs[fid] = np.asarray(vec, dtype="<f4").tobytes()
                sentences = self.vectors.sentence_vectors(ids)
            n = len(FACT_EXPORT_COLUMNS)
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
        """Links whose both ends are facts of the bank, ordered by (from, to, kind): the
        bank's facts a page at a time, each page's outgoing links by the primary key."""
        last = -1
        while True:
            ids = [
                r[0]
                for r in self.conn.execute(
                    "SELECT id FROM facts WHERE +bank_id = ? AND id > ? ORDER BY id LIMIT ?",
                    (bank_id, last, PAGE),
                )
            ]
            if not ids:
                return
            yield from self.conn.execute(
                "SELECT l.from_fact, l.to_fact, l.kind, l.weight FROM links l "
                "CROSS JOIN facts b ON b.id = l.to_fact "
                f"WHERE l.from_fact IN ({marks(len(ids))}) AND b.bank_id = ? "
                "ORDER BY l.from_fact, l.to_fact, l.kind",
                (*ids, bank_id),
            ).fetchall()
            last = ids[-1]

    # -- import (rows as exported; call inside atomic()) ---------------------------------

    @contextmanager
    def refused_writes(self) -> Iterator[None]:
        """A write SQLite refuses inside (a constraint, a value of the wrong type, a full
        disk) raises WriteRefused, whose text is SQLite's: the importer names the line it
        came from."""
        try:
            yield
        except apsw.Error as exc:
            raise WriteRefused(str(exc)) from exc

    def defer_foreign_keys(self) -> None:
        """Check foreign keys at this transaction's commit, not at each statement: an import
        writes rows before the rows they point to."""
        self.core.defer_foreign_keys()

    def ids_taken(self, table: str, lo: int, hi: int) -> bool:
        """Whether an id in lo..hi is in use, or (facts) was given to a fact since forgotten:
        a fact id names one memory for good (schema 8)."""
        if table == "facts" and lo <= self._forgotten_fact_high():
            return True
        return (
            self.conn.execute(
                f"SELECT 1 FROM {table} WHERE id BETWEEN ? AND ? LIMIT 1", (lo, hi)
            ).fetchone()
            is not None
        )

    def max_id(self, table: str) -> int:
        """The largest id in use (facts: or ever given, forgotten since)."""
        used = self.conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0]
        return max(used, self._forgotten_fact_high()) if table == "facts" else used

    def keep_fact_ids_past(self, high: int) -> None:
        """Never give a fact id up to `high` again (an imported bank's forgotten ids)."""
        if high > self._forgotten_fact_high():
            self.conn.execute(
                "INSERT INTO meta(key, value) VALUES('fact_id_high', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (str(high),),
            )

    def _forgotten_fact_high(self) -> int:
        value = self.core.get_meta("fact_id_high")
        return int(value) if value and value.isdigit() else 0

    def create_bank_row(self, name: str, created_at: str) -> int:
        self.conn.execute("INSERT INTO banks(name, created_at) VALUES(?, ?)", (name, created_at))
        return self.conn.last_insert_rowid()

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
            "sync_root) VALUES(?, ?, ?, ?, ?, ?)",
            (row_id, bank_id, external_id, created, source_hash, sync_root),
        )

    def import_chunk(
        self, bank_id: int, row_id: int, document: int | None, source_id: str | None, text: str
    ) -> None:
        self.conn.execute(
            "INSERT INTO chunks(id, bank_id, document_id, source_id, text) VALUES(?, ?, ?, ?, ?)",
            (row_id, bank_id, document, source_id, text),
        )

    def import_entity(self, bank_id: int, row_id: int, rec: dict[str, Any]) -> None:
        self.conn.execute(
            "INSERT INTO entities(id, bank_id, name, aliases, first_seen, last_seen, "
            "mention_count) VALUES(?, ?, ?, ?, ?, ?, ?)",
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
        self.conn.executemany(
            "INSERT OR IGNORE INTO entity_keys(key, entity_id) VALUES(?, ?)",
            [(k, row_id) for k in rec["keys"]],
        )

    def import_fact(
        self,
        bank_id: int,
        rec: dict[str, Any],
        entity_ids: Sequence[int],
        embedding: bytes,
        tail_tokens: int | None = None,
    ) -> None:
        """One fact with every column as given (ids already mapped), its tags, FTS row
        (its text and context indexed here, its entities and lead-in as exported), entity
        rows and vector. tail_tokens is not exported (it depends on the tokenizer): the
        importer counts it."""
        fts_text = fts.index_text(rec["text"])
        fts_context = fts.index_text(rec["context"] or "")
        values = [
            json.dumps(rec[c], ensure_ascii=False) if c in _JSON_COLUMNS else rec[c]
            for c in FACT_EXPORT_COLUMNS
        ]
        self.conn.execute(
            f"INSERT INTO facts(bank_id, {', '.join(FACT_EXPORT_COLUMNS)}, tail_tokens) "
            f"VALUES(?, {marks(len(FACT_EXPORT_COLUMNS))}, ?)",
            (bank_id, *values, tail_tokens),
        )
        fid = rec["id"]
        self.conn.executemany(
            "INSERT OR IGNORE INTO fact_tags(fact_id, tag) VALUES(?, ?)",
            [(fid, t) for t in rec["tags"]],
        )
        self.conn.execute(
            "INSERT INTO fact_fts(rowid, text, context, entities, lead_in) VALUES(?, ?, ?, ?, ?)",
            (fid, fts_text, fts_context, rec["fts_entities"] or "", rec["fts_lead_in"] or ""),
        )
        self.conn.executemany(
            "INSERT INTO fact_entities(fact_id, entity_id) VALUES(?, ?)",
            [(fid, e) for e in entity_ids],
        )
        # The fact's vector, then its sentences' (exchange._vector).
        dim = self.vectors.vector_dim() or len(embedding) // 4
        rows = np.frombuffer(embedding, dtype=np.float32).reshape(-1, dim)
        self.vectors.add_vector(fid, bank_id, rec["fact_type"], rows[0])
        if len(rows) > 1:
            self.vectors.add_sentence_vectors(fid, bank_id, rec["fact_type"], rows[1:])

    def import_links(self, rows: Sequence[tuple[int, int, str, float]]) -> None:
        self.conn.executemany(
            "INSERT INTO links(from_fact, to_fact, kind, weight) VALUES(?, ?, ?, ?)", rows
        )

    def dangling_references(self) -> int:
        """Rows whose foreign keys point nowhere (checked before an import commits)."""
        return len(self.conn.execute("PRAGMA foreign_key_check").fetchall())

    def correction_loops(self, bank_id: int) -> int:
        """Facts of the bank on a correction chain (superseded_by, on and on) that comes back
        to itself: no version of it is current (checked before an import commits). One walk
        over the bank's chains, each fact visited once."""
        successor = dict(
            self.conn.execute(
                "SELECT id, superseded_by FROM facts WHERE bank_id = ? "
                "AND superseded_by IS NOT NULL",
                (bank_id,),
            ).fetchall()
        )
        done: set[int] = set()
        on_loops = 0
        for first in successor:
            path: dict[int, int] = {}  # fact -> its place on this walk
            at: int | None = first
            while at is not None and at not in done and at not in path:
                path[at] = len(path)
                at = successor.get(at)
            if at is not None and at in path:  # the walk came back to a fact of its own
                on_loops += len(path) - path[at]
            done.update(path)
        return on_loops
