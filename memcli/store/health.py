"""Read-only consistency checks of a store, for `mem doctor` (memcli/doctor.py).

Every fact has three faces that recall relies on: its row in `facts`, its row in the FTS5
index (keyword arm) and its vector (semantic, graph and temporal arms). A fact missing one
of them is silently invisible to those arms, so the doctor counts them and names the ids
that differ. Nothing here writes.
"""

from __future__ import annotations

from typing import Any

import apsw

from memcli.store.core import StoreCore
from memcli.store.types import StoreBusy, StoreError
from memcli.store.vectors import VectorsPart

# Every table of a store's schema, for row_counts (fact_vec: once a vector was stored).
CENSUS_TABLES = (
    "facts", "fact_fts", "fact_vec", "sentence_vec", "fact_tags", "fact_entities", "entities",
    "entity_keys", "links", "chunks", "documents", "banks",
)  # fmt: skip


def library_versions() -> list[tuple[str, str]]:
    """(component, version) of SQLite, apsw and the sqlite-vec package, with no store open
    (the doctor's report of an installation without one)."""
    import sqlite_vec

    return [
        ("sqlite", f"SQLite {apsw.sqlite_lib_version()}, apsw {apsw.apsw_version()}"),
        ("sqlite-vec", f"package {getattr(sqlite_vec, '__version__', '?')}"),
    ]


class HealthPart:
    """store.health: the doctor's read-only checks."""

    def __init__(self, core: StoreCore, vectors: VectorsPart) -> None:
        self.core = core
        self.conn = core.conn
        self.vectors = vectors

    def quick_check(self) -> list[str]:
        """SQLite's PRAGMA quick_check: ['ok'] for a sound file, else its complaints."""
        return [r[0] for r in self.conn.execute("PRAGMA quick_check")]

    def foreign_key_violations(self) -> int:
        return len(self.conn.execute("PRAGMA foreign_key_check").fetchall())

    def fts_integrity_error(self) -> str | None:
        """FTS5's own integrity-check of fact_fts (its index against its stored rows); None
        when it passes. The command is spelled as an INSERT but changes nothing. StoreBusy
        when another process held the write lock past the busy timeout: that says nothing
        of the index."""
        try:
            with self.core.atomic():  # the write lock, waited for as any writer waits
                self.conn.execute("INSERT INTO fact_fts(fact_fts) VALUES('integrity-check')")
        except StoreBusy:
            raise
        except (apsw.Error, StoreError) as exc:
            return str(exc)
        return None

    def has_vector_table(self) -> bool:
        return (
            self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'fact_vec'"
            ).fetchone()
            is not None
        )

    def index_counts(self) -> dict[str, int | None]:
        """Rows in facts, in the FTS index and in the vector table (None: no vector table)."""
        facts = self.conn.execute("SELECT count(*) FROM facts").fetchone()[0]
        fts = self.conn.execute("SELECT count(*) FROM fact_fts").fetchone()[0]
        vectors = (
            self.conn.execute("SELECT count(*) FROM fact_vec").fetchone()[0]
            if self.has_vector_table()
            else None
        )
        return {"facts": facts, "fts_rows": fts, "vectors": vectors}

    def index_mismatches(self, limit: int = 20) -> dict[str, list[int]]:
        """Up to `limit` ids each: facts without an FTS row or a vector, and FTS rows or
        vectors without a fact."""
        fact_ids = {r[0] for r in self.conn.execute("SELECT id FROM facts")}
        fts_ids = {r[0] for r in self.conn.execute("SELECT rowid FROM fact_fts")}
        out = {
            "facts_without_fts": sorted(fact_ids - fts_ids)[:limit],
            "fts_without_fact": sorted(fts_ids - fact_ids)[:limit],
            "facts_without_vector": [],
            "vectors_without_fact": [],
        }
        if self.has_vector_table():
            vec_ids = {r[0] for r in self.conn.execute("SELECT fact_id FROM fact_vec")}
            out["facts_without_vector"] = sorted(fact_ids - vec_ids)[:limit]
            out["vectors_without_fact"] = sorted(vec_ids - fact_ids)[:limit]
        return out

    def damaged_fact_fields(self, limit: int = 20) -> list[int]:
        """Facts whose tags are not a JSON array of strings or whose metadata is not a JSON
        object (a row edited by hand): read as no tags and no metadata."""
        rows = self.conn.execute(
            # json_type of text that is not JSON raises: asked only of valid JSON.
            "SELECT id FROM facts "
            "WHERE (CASE WHEN json_valid(tags) THEN json_type(tags) END) IS NOT 'array' "
            "OR EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(tags) THEN tags END) "
            "WHERE type != 'text') "
            "OR (CASE WHEN json_valid(metadata) THEN json_type(metadata) END) IS NOT 'object' "
            "ORDER BY id LIMIT ?",
            (limit + 1,),
        ).fetchall()
        return [r[0] for r in rows]

    def orphan_counts(self) -> dict[str, int]:
        """Rows that point at nothing (links, fact-entity rows, tags) and entities that no
        fact mentions any more."""
        one = self.conn.execute

        def count(sql: str) -> int:
            return one(sql).fetchone()[0]

        return {
            "links": count(
                "SELECT count(*) FROM links l WHERE NOT EXISTS "
                "(SELECT 1 FROM facts f WHERE f.id = l.from_fact) OR NOT EXISTS "
                "(SELECT 1 FROM facts f WHERE f.id = l.to_fact)"
            ),
            "fact_entities": count(
                "SELECT count(*) FROM fact_entities fe WHERE NOT EXISTS "
                "(SELECT 1 FROM facts f WHERE f.id = fe.fact_id) OR NOT EXISTS "
                "(SELECT 1 FROM entities e WHERE e.id = fe.entity_id)"
            ),
            "fact_tags": count(
                "SELECT count(*) FROM fact_tags t WHERE NOT EXISTS "
                "(SELECT 1 FROM facts f WHERE f.id = t.fact_id)"
            ),
            "entities_unused": count(
                "SELECT count(*) FROM entities e WHERE NOT EXISTS "
                "(SELECT 1 FROM fact_entities fe WHERE fe.entity_id = e.id)"
            ),
        }

    def highest_ids(self) -> dict[str, int]:
        """The highest id each numbered table has given (facts: forgotten ones too)."""
        out = {
            table: self.conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0]
            for table in ("facts", "documents", "chunks", "entities")
        }
        high = self.core.get_meta("fact_id_high")
        if high and high.isdigit():
            out["facts"] = max(out["facts"], int(high))
        return out

    def bank_embedders(self) -> list[dict[str, Any]]:
        """Each user bank with facts: the embedder name and fingerprint it recorded."""
        rows = self.conn.execute(
            "SELECT b.name, b.embedder, b.embedder_fingerprint, "
            "(SELECT count(*) FROM facts f WHERE f.bank_id = b.id) "
            "FROM banks b WHERE b.kind = 'user' ORDER BY b.name"
        )
        return [
            {"bank": name, "embedder": emb, "fingerprint": fp, "facts": n}
            for name, emb, fp, n in rows
        ]

    def sqlite_vec_version(self) -> str:
        return self.conn.execute("SELECT vec_version()").fetchone()[0]

    def versions(self) -> list[tuple[str, str]]:
        """(component, version) of what the store runs on, sqlite-vec as loaded."""
        return [library_versions()[0], ("sqlite-vec", f"{self.sqlite_vec_version()} (loaded)")]

    def row_counts(self) -> dict[str, int]:
        """How many rows each table holds (a census: a command that must change nothing,
        an import that must bring back every row)."""
        return {
            table: self.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            if (table != "fact_vec" or self.has_vector_table())
            and (table != "sentence_vec" or self.core.has_table(table))
            else 0
            for table in CENSUS_TABLES
        }

    def fact_traces(self, fact_id: int) -> dict[str, int]:
        """How many rows of each table still mention a fact (0 everywhere after a forget)."""
        q = self.conn.execute
        out = {
            "facts": q("SELECT count(*) FROM facts WHERE id = ?", (fact_id,)).fetchone()[0],
            "fact_fts": q("SELECT count(*) FROM fact_fts WHERE rowid = ?", (fact_id,)).fetchone()[
                0
            ],
            "fact_tags": q(
                "SELECT count(*) FROM fact_tags WHERE fact_id = ?", (fact_id,)
            ).fetchone()[0],
            "sentence_vec": q(
                "SELECT count(*) FROM sentence_vec WHERE fact_id = ?", (fact_id,)
            ).fetchone()[0],
            "fact_entities": q(
                "SELECT count(*) FROM fact_entities WHERE fact_id = ?", (fact_id,)
            ).fetchone()[0],
            "links": q(
                "SELECT count(*) FROM links WHERE from_fact = ? OR to_fact = ?", (fact_id, fact_id)
            ).fetchone()[0],
            "superseded_by": q(
                "SELECT count(*) FROM facts WHERE superseded_by = ?", (fact_id,)
            ).fetchone()[0],
        }
        out["fact_vec"] = int(self.vectors.has_vector(fact_id))
        return out
