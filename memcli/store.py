"""The one SQLite file: schema, migrations, and the small set of reads and writes mem needs.

Opened with apsw (sqlite-vec loaded, WAL, busy timeout, foreign keys). Virtual tables (FTS5 and
vec0) do not take part in foreign-key cascades, so every delete of facts goes through
`delete_facts`, which clears them too.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import sqlite_vec

from memcli import fts

SCHEMA_VERSION = 2
BUSY_TIMEOUT_MS = 30_000
FACT_TYPES = ("world", "experience", "observation")
LINK_KINDS = ("semantic", "temporal", "causal")


class StoreError(Exception):
    """A problem with the database file that the user can act on (one-line message)."""


# Each entry migrates the schema from version i to i + 1. Add new entries at the end; never
# edit one that has shipped.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE banks(
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL
    );
    CREATE TABLE documents(
        id INTEGER PRIMARY KEY,
        bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
        external_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE(bank_id, external_id)
    );
    CREATE TABLE chunks(
        id INTEGER PRIMARY KEY,
        bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
        document_id INTEGER REFERENCES documents(id) ON DELETE CASCADE,
        source_id TEXT,
        text TEXT NOT NULL
    );
    CREATE TABLE facts(
        id INTEGER PRIMARY KEY,
        bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
        text TEXT NOT NULL,
        context TEXT,
        fact_type TEXT NOT NULL CHECK (fact_type IN ('world', 'experience', 'observation')),
        mentioned_at TEXT NOT NULL,
        occurred_start TEXT,
        occurred_end TEXT,
        -- when the fact happened if known, else when it was said: the temporal arm's axis
        event_time TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        metadata TEXT NOT NULL DEFAULT '{}',
        proof_count INTEGER NOT NULL DEFAULT 1,
        source_id TEXT,
        document_id INTEGER REFERENCES documents(id) ON DELETE CASCADE,
        chunk_id INTEGER REFERENCES chunks(id) ON DELETE SET NULL,
        content_hash TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE(bank_id, content_hash)
    );
    CREATE INDEX facts_event_time ON facts(bank_id, event_time);
    CREATE INDEX facts_document ON facts(document_id);
    CREATE TABLE fact_tags(
        fact_id INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
        tag TEXT NOT NULL,
        PRIMARY KEY(fact_id, tag)
    ) WITHOUT ROWID;
    CREATE INDEX fact_tags_tag ON fact_tags(tag);
    CREATE TABLE entities(
        id INTEGER PRIMARY KEY,
        bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        aliases TEXT NOT NULL DEFAULT '[]',
        first_seen TEXT,
        last_seen TEXT,
        mention_count INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE entity_keys(
        key TEXT NOT NULL,
        entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        PRIMARY KEY(key, entity_id)
    ) WITHOUT ROWID;
    CREATE TABLE fact_entities(
        fact_id INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
        entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        PRIMARY KEY(fact_id, entity_id)
    ) WITHOUT ROWID;
    CREATE INDEX fact_entities_entity ON fact_entities(entity_id);
    CREATE TABLE links(
        from_fact INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
        to_fact INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
        kind TEXT NOT NULL CHECK (kind IN ('semantic', 'temporal', 'causal')),
        weight REAL NOT NULL,
        PRIMARY KEY(from_fact, to_fact, kind)
    ) WITHOUT ROWID;
    CREATE INDEX links_to ON links(to_fact);
    -- rowid = facts.id; text is pre-segmented so CJK characters are separate tokens (fts.py);
    -- lead_in is what was said just before the fact (a reply's question), weighted low
    CREATE VIRTUAL TABLE fact_fts USING fts5(
        text, context, entities, lead_in, tokenize = 'porter unicode61 remove_diacritics 2'
    );
    """,
    # 2: recall looks up the speakers a query names (contexts_among) on every query.
    "CREATE INDEX facts_context ON facts(bank_id, lower(context));",
]


# One probe of the facts_context index per candidate name (see Store.contexts_among).
CONTEXTS_AMONG_SQL = (
    "SELECT DISTINCT (SELECT context FROM facts WHERE bank_id = ? "
    "AND lower(context) = lower(j.value) LIMIT 1) AS found "
    "FROM json_each(?) AS j WHERE found IS NOT NULL"
)


def iso(dt: datetime | None) -> str | None:
    return dt.isoformat(timespec="seconds") if dt is not None else None


def parse_iso(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


@dataclass
class Fact:
    """One stored memory, as read back for recall and output."""

    id: int
    text: str
    context: str | None
    fact_type: str
    mentioned_at: datetime
    occurred_start: datetime | None
    occurred_end: datetime | None
    tags: list[str]
    metadata: dict[str, Any]
    proof_count: int
    source_id: str | None
    document_id: str | None
    chunk_id: int | None
    entities: list[str]

    @property
    def event_time(self) -> datetime:
        return self.occurred_start or self.mentioned_at


def _is_sqlite_file(path: Path) -> bool:
    with open(path, "rb") as fh:
        header = fh.read(16)
    return header == b"SQLite format 3\x00" or header == b""


class Store:
    """A connection to one mem database file."""

    def __init__(self, path: str | os.PathLike, *, create: bool = True, readonly: bool = False):
        self.path = Path(path)
        if self.path.exists():
            if self.path.is_dir():
                raise StoreError(f"{self.path} is a directory, not a mem database")
            if not _is_sqlite_file(self.path):
                raise StoreError(f"{self.path} is not an SQLite database (left untouched)")
        elif not create:
            raise StoreError(f"no mem database at {self.path} (run `mem retain` first)")
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = (
            apsw.SQLITE_OPEN_READONLY
            if readonly
            else (apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
        )
        try:
            self.conn = apsw.Connection(str(self.path), flags=flags)
            self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            self.conn.enable_load_extension(True)
            self.conn.load_extension(sqlite_vec.loadable_path())
            self.conn.enable_load_extension(False)
            self.conn.execute("PRAGMA foreign_keys = ON")
            if not readonly:
                self._migrate()
            else:
                self._check_version()
        except apsw.NotADBError as exc:
            raise StoreError(f"{self.path} is not an SQLite database (left untouched)") from exc

    # -- set-up ---------------------------------------------------------------------------

    def _check_version(self) -> int:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer mem (schema {version} > {SCHEMA_VERSION})"
            )
        return version

    def _migrate(self) -> None:
        version = self._check_version()
        if version == SCHEMA_VERSION:
            return
        # Tables with version 0 mean a foreign database, unless another mem process committed
        # the schema (and its version, in the same transaction) between our two reads: then a
        # second look at the version sees it.
        if version == 0 and self._has_foreign_tables() and self._check_version() == 0:
            raise StoreError(f"{self.path} is an SQLite database but not a mem database")
        self._use_wal()
        with self.write():
            version = self.conn.execute("PRAGMA user_version").fetchone()[0]
            for target in range(version, SCHEMA_VERSION):
                self.conn.execute(MIGRATIONS[target])
                self.conn.execute(f"PRAGMA user_version = {target + 1}")

    def _use_wal(self) -> None:
        """Switch the file to WAL (a property of the file, set once, outside a transaction).
        The switch needs an exclusive lock and SQLite answers SQLITE_BUSY at once instead of
        waiting on the busy timeout, so processes creating one new file together retry."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode = WAL")
                return
            except apsw.BusyError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _has_foreign_tables(self) -> bool:
        rows = self.conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
        ).fetchone()
        return rows[0] > 0

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def write(self) -> Iterator[apsw.Connection]:
        """A write transaction taken up front (BEGIN IMMEDIATE) so that two writers queue on
        the busy timeout instead of failing half way with SQLITE_BUSY on lock upgrade."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")

    # -- meta and banks -------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def bank_id(self, name: str) -> int | None:
        row = self.conn.execute("SELECT id FROM banks WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None

    def require_bank(self, name: str) -> int:
        bank = self.bank_id(name)
        if bank is None:
            known = ", ".join(self.bank_names()) or "none yet"
            raise StoreError(f"unknown bank {name!r} (banks: {known})")
        return bank

    def ensure_bank(self, name: str, now: datetime) -> int:
        bank = self.bank_id(name)
        if bank is not None:
            return bank
        self.conn.execute(
            "INSERT OR IGNORE INTO banks(name, created_at) VALUES(?, ?)", (name, iso(now))
        )
        return self.bank_id(name)  # type: ignore[return-value]

    def bank_names(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM banks ORDER BY name")]

    def bank_stats(self) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT b.name, (SELECT count(*) FROM facts f WHERE f.bank_id = b.id), "
            "(SELECT count(*) FROM entities e WHERE e.bank_id = b.id), "
            "(SELECT count(*) FROM links l JOIN facts f ON f.id = l.from_fact "
            " WHERE f.bank_id = b.id), "
            "(SELECT min(event_time) FROM facts f WHERE f.bank_id = b.id), "
            "(SELECT max(event_time) FROM facts f WHERE f.bank_id = b.id) "
            "FROM banks b ORDER BY b.name"
        )
        keys = ("bank", "facts", "entities", "links", "first", "last")
        return [dict(zip(keys, r)) for r in rows]

    # -- vectors --------------------------------------------------------------------------

    def vector_dim(self) -> int | None:
        value = self.get_meta("embedding_dim")
        return int(value) if value else None

    def ensure_vector_table(self, model_name: str, dim: int) -> None:
        """Create the vec0 table for this embedder, or check the file was made with it: vectors
        of two different models in one table would be silently meaningless."""
        have_model = self.get_meta("embedder")
        if have_model is None:
            self.conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS fact_vec USING vec0("
                "fact_id INTEGER PRIMARY KEY, bank_id INTEGER PARTITION KEY, fact_type TEXT, "
                f"embedding float[{int(dim)}] distance_metric=cosine)"
            )
            self.set_meta("embedder", model_name)
            self.set_meta("embedding_dim", str(dim))
        elif have_model != model_name or self.vector_dim() != dim:
            raise StoreError(
                f"{self.path} was embedded with {have_model} ({self.vector_dim()} dims), "
                f"not {model_name} ({dim} dims)"
            )

    def has_vectors(self) -> bool:
        return self.get_meta("embedder") is not None

    def bank_vectors(self, bank_id: int) -> tuple[np.ndarray, np.ndarray]:
        """All (ids, unit vectors) of one bank: used to build retain-time links in numpy."""
        if not self.has_vectors():
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        rows = self.conn.execute(
            "SELECT fact_id, embedding FROM fact_vec WHERE bank_id = ?", (bank_id,)
        ).fetchall()
        dim = self.vector_dim() or 0
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        vecs = (
            np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, dim)
            if rows
            else np.zeros((0, dim), dtype=np.float32)
        )
        return ids, vecs

    def vectors_for(self, fact_ids: Sequence[int]) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        for batch in _batched(list(fact_ids), 500):
            marks = ",".join("?" * len(batch))
            for fid, blob in self.conn.execute(
                f"SELECT fact_id, embedding FROM fact_vec WHERE fact_id IN ({marks})", batch
            ):
                out[fid] = np.frombuffer(blob, dtype=np.float32)
        return out

    # -- facts ----------------------------------------------------------------------------

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
        lead_in: str | None = None,
    ) -> int:
        event_time = occurred_start or mentioned_at
        self.conn.execute(
            "INSERT INTO facts(bank_id, text, context, fact_type, mentioned_at, occurred_start, "
            "occurred_end, event_time, tags, metadata, source_id, document_id, chunk_id, "
            "content_hash, created_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
        self.conn.execute(
            "INSERT INTO fact_vec(fact_id, bank_id, fact_type, embedding) VALUES(?, ?, ?, ?)",
            (fact_id, bank_id, fact_type, np.asarray(embedding, dtype=np.float32).tobytes()),
        )
        return fact_id

    def existing_hashes(self, bank_id: int, hashes: Iterable[str]) -> set[str]:
        found: set[str] = set()
        for batch in _batched(list(hashes), 500):
            marks = ",".join("?" * len(batch))
            found.update(
                r[0]
                for r in self.conn.execute(
                    "SELECT content_hash FROM facts "
                    f"WHERE bank_id = ? AND content_hash IN ({marks})",
                    (bank_id, *batch),
                )
            )
        return found

    def delete_facts(self, fact_ids: Sequence[int]) -> None:
        for batch in _batched(list(fact_ids), 500):
            marks = ",".join("?" * len(batch))
            self.conn.execute(f"DELETE FROM fact_fts WHERE rowid IN ({marks})", batch)
            if self.has_vectors():
                self.conn.execute(f"DELETE FROM fact_vec WHERE fact_id IN ({marks})", batch)
            self.conn.execute(f"DELETE FROM facts WHERE id IN ({marks})", batch)

    def replace_document(self, bank_id: int, external_id: str, now: datetime) -> int:
        """Delete a document's facts and chunks (if it exists) and return a fresh row for it."""
        row = self.conn.execute(
            "SELECT id FROM documents WHERE bank_id = ? AND external_id = ?",
            (bank_id, external_id),
        ).fetchone()
        if row:
            ids = [
                r[0]
                for r in self.conn.execute("SELECT id FROM facts WHERE document_id = ?", (row[0],))
            ]
            self.delete_facts(ids)
            self.conn.execute("DELETE FROM documents WHERE id = ?", (row[0],))
        self.conn.execute(
            "INSERT INTO documents(bank_id, external_id, created_at) VALUES(?, ?, ?)",
            (bank_id, external_id, iso(now)),
        )
        return self.conn.last_insert_rowid()

    def insert_chunk(
        self, bank_id: int, document_id: int | None, source_id: str | None, text: str
    ) -> int:
        self.conn.execute(
            "INSERT INTO chunks(bank_id, document_id, source_id, text) VALUES(?, ?, ?, ?)",
            (bank_id, document_id, source_id, text),
        )
        return self.conn.last_insert_rowid()

    def chunk_texts(self, chunk_ids: Sequence[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        for batch in _batched(list(chunk_ids), 500):
            marks = ",".join("?" * len(batch))
            out.update(
                self.conn.execute(f"SELECT id, text FROM chunks WHERE id IN ({marks})", batch)
            )
        return out

    def add_links(self, rows: Iterable[tuple[int, int, str, float]]) -> None:
        """(from_fact, to_fact, kind, weight); an existing link keeps the larger weight."""
        self.conn.executemany(
            "INSERT INTO links(from_fact, to_fact, kind, weight) VALUES(?, ?, ?, ?) "
            "ON CONFLICT(from_fact, to_fact, kind) DO UPDATE SET "
            "weight = max(weight, excluded.weight)",
            rows,
        )

    def facts_by_id(self, fact_ids: Sequence[int]) -> dict[int, Fact]:
        out: dict[int, Fact] = {}
        ids = list(fact_ids)
        entity_names: dict[int, list[str]] = {i: [] for i in ids}
        for batch in _batched(ids, 500):
            marks = ",".join("?" * len(batch))
            for fid, name in self.conn.execute(
                "SELECT fe.fact_id, e.name FROM fact_entities fe JOIN entities e "
                f"ON e.id = fe.entity_id WHERE fe.fact_id IN ({marks}) ORDER BY e.name",
                batch,
            ):
                entity_names[fid].append(name)
            for row in self.conn.execute(
                "SELECT f.id, f.text, f.context, f.fact_type, f.mentioned_at, f.occurred_start, "
                "f.occurred_end, f.tags, f.metadata, f.proof_count, f.source_id, d.external_id, "
                "f.chunk_id FROM facts f LEFT JOIN documents d ON d.id = f.document_id "
                f"WHERE f.id IN ({marks})",
                batch,
            ):
                out[row[0]] = Fact(
                    id=row[0],
                    text=row[1],
                    context=row[2],
                    fact_type=row[3],
                    mentioned_at=datetime.fromisoformat(row[4]),
                    occurred_start=parse_iso(row[5]),
                    occurred_end=parse_iso(row[6]),
                    tags=json.loads(row[7]),
                    metadata=json.loads(row[8]),
                    proof_count=row[9],
                    source_id=row[10],
                    document_id=row[11],
                    chunk_id=row[12],
                    entities=entity_names.get(row[0], []),
                )
        return out

    def previous_facts(self, fact_ids: Sequence[int], max_gap_hours: float) -> dict[int, int]:
        """For each fact, the fact stored just before it in the same bank and document (the
        nearest lower id), if it was said at most max_gap_hours earlier."""
        out: dict[int, int] = {}
        for batch in _batched(list(fact_ids), 500):
            marks = ",".join("?" * len(batch))
            for fid, prev, gap in self.conn.execute(
                "SELECT f.id, p.id, julianday(f.mentioned_at) - julianday(p.mentioned_at) "
                "FROM facts f JOIN facts p ON p.id = (SELECT q.id FROM facts q WHERE "
                "q.bank_id = f.bank_id AND q.document_id IS f.document_id AND q.id < f.id "
                f"ORDER BY q.id DESC LIMIT 1) WHERE f.id IN ({marks})",
                batch,
            ):
                if 0 <= gap * 24 <= max_gap_hours:
                    out[fid] = prev
        return out

    def contexts_among(self, bank_id: int, candidates: Sequence[str]) -> list[str]:
        """The contexts (who said it, where it came from) of one bank that equal one of
        `candidates`, ignoring ASCII case: one index probe per candidate, never a scan."""
        rows = self.conn.execute(CONTEXTS_AMONG_SQL, (bank_id, json.dumps(list(candidates))))
        return sorted(row[0] for row in rows)

    def fact_count(self, bank_id: int | None = None) -> int:
        if bank_id is None:
            return self.conn.execute("SELECT count(*) FROM facts").fetchone()[0]
        return self.conn.execute(
            "SELECT count(*) FROM facts WHERE bank_id = ?", (bank_id,)
        ).fetchone()[0]


def _batched(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
