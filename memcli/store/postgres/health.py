"""store.health on PostgreSQL: the doctor's read-only checks (store/health.py's, and what a
server adds: the pgvector extension and its version, the schema version, whether every
index is valid)."""

from __future__ import annotations

import json
from typing import Any

from memcli.store.postgres import schema
from memcli.store.postgres.core import PgCore
from memcli.store.postgres.exchange import _REFERENCES, sequence_high


class PgHealth:
    def __init__(self, core: PgCore, vectors: Any) -> None:
        self.core = core
        self.conn = core.conn
        self.vectors = vectors

    def quick_check(self) -> list[str]:
        """['ok'] when the extension is there, the schema is this mem's and every index of
        mem's tables is valid and ready; else what is wrong."""
        problems = []
        ext = self.conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        if ext is None:
            problems.append("the pgvector extension is not installed in this database")
        version = self.core.schema_version()
        if version != schema.SCHEMA_VERSION:
            problems.append(f"schema version {version}, expected {schema.SCHEMA_VERSION}")
        for name, valid, ready in self.conn.execute(
            "SELECT c.relname, i.indisvalid, i.indisready FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid "
            "WHERE t.relnamespace = current_schema()::regnamespace AND t.relname = ANY(%s) "
            "ORDER BY c.relname",
            (sorted(schema.MEM_TABLES),),
        ):
            if not (valid and ready):
                problems.append(f"index {name} is not valid (REINDEX INDEX {name})")
        if self.vectors.has_vectors() and not self.vectors.index_health()["present"]:
            problems.append("the vector index fact_vec_hnsw is missing")
        return problems or ["ok"]

    def foreign_key_violations(self) -> int:
        total = 0
        for child, column, parent in _REFERENCES:
            total += self.conn.execute(
                f"SELECT count(*) FROM {child} c WHERE c.{column} IS NOT NULL AND NOT EXISTS "
                f"(SELECT 1 FROM {parent} p WHERE p.id = c.{column})"
            ).fetchone()[0]
        return total

    def fts_integrity_error(self) -> str | None:
        """Whether every keyword row's tsvector is what its texts give (a row edited by hand,
        or made by another text search configuration, would rank wrong): 2,000 rows a
        statement, their texts folded here as retain folds them."""
        from memcli.store.postgres.schema import TEXT_CONFIG
        from memcli.store.postgres.sql import fold

        c = TEXT_CONFIG
        bad = 0
        last = -1
        while True:
            rows = self.conn.execute(
                "SELECT fact_id, text, context, entities, lead_in FROM fact_fts "
                "WHERE fact_id > %s ORDER BY fact_id LIMIT 2000",
                (last,),
            ).fetchall()
            if not rows:
                break
            last = rows[-1][0]
            columns = [[fold(r[i]) for r in rows] for i in range(1, 5)]
            bad += self.conn.execute(
                "SELECT count(*) FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], "
                "%s::text[]) AS r(id, a, b, c, d) JOIN fact_fts x ON x.fact_id = r.id "
                f"WHERE x.doc != (setweight(to_tsvector('{c}', r.a), 'A') || "
                f"setweight(to_tsvector('{c}', r.b), 'B') || "
                f"setweight(to_tsvector('{c}', r.c), 'C') || "
                f"setweight(to_tsvector('{c}', r.d), 'D'))",
                ([r[0] for r in rows], *columns),
            ).fetchone()[0]
        return f"{bad} keyword rows do not match their text" if bad else None

    def index_counts(self) -> dict[str, int | None]:
        facts = self.conn.execute("SELECT count(*) FROM facts").fetchone()[0]
        fts = self.conn.execute("SELECT count(*) FROM fact_fts").fetchone()[0]
        vectors = (
            self.conn.execute("SELECT count(*) FROM fact_vec").fetchone()[0]
            if self.vectors.has_vectors()
            else None
        )
        return {"facts": facts, "fts_rows": fts, "vectors": vectors}

    def index_mismatches(self, limit: int = 20) -> dict[str, list[int]]:
        def ids(sql: str) -> list[int]:
            return [r[0] for r in self.conn.execute(sql + " ORDER BY 1 LIMIT %s", (limit,))]

        out = {
            "facts_without_fts": ids(
                "SELECT f.id FROM facts f WHERE NOT EXISTS "
                "(SELECT 1 FROM fact_fts x WHERE x.fact_id = f.id)"
            ),
            "fts_without_fact": [],  # a keyword row cannot outlive its fact (foreign key)
            "facts_without_vector": [],
            "vectors_without_fact": [],
        }
        if self.vectors.has_vectors():
            out["facts_without_vector"] = ids(
                "SELECT f.id FROM facts f WHERE NOT EXISTS "
                "(SELECT 1 FROM fact_vec v WHERE v.fact_id = f.id)"
            )
        return out

    def damaged_fact_fields(self, limit: int = 20) -> list[int]:
        """Facts whose tags are not a JSON array of strings or whose metadata is not a JSON
        object, checked here (a cast of text that is not JSON would fail the whole query)."""
        out: list[int] = []
        for fid, tags, metadata in self.conn.execute(
            "SELECT id, tags, metadata FROM facts WHERE tags != '[]' OR metadata != '{}' "
            "ORDER BY id"
        ):
            if not (_json_is(tags, list) and _json_is(metadata, dict)):
                out.append(fid)
                if len(out) > limit:
                    break
        return out

    def orphan_counts(self) -> dict[str, int]:
        def count(sql: str) -> int:
            return self.conn.execute(sql).fetchone()[0]

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
        out = {}
        for table in ("facts", "documents", "chunks", "entities"):
            used = self.conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0]
            out[table] = max(used, sequence_high(self.conn, table))
        return out

    def bank_embedders(self) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT b.name, b.embedder, b.embedder_fingerprint, "
            "(SELECT count(*) FROM facts f WHERE f.bank_id = b.id) "
            "FROM banks b WHERE b.kind = 'user' ORDER BY b.name COLLATE \"C\""
        )
        return [
            {"bank": name, "embedder": emb, "fingerprint": fp, "facts": n}
            for name, emb, fp, n in rows
        ]

    def versions(self) -> list[tuple[str, str]]:
        server = self.conn.execute("SHOW server_version").fetchone()[0]
        ext = self.conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        return [
            ("PostgreSQL", server),
            ("pgvector", ext[0] if ext else "missing"),
            ("schema", str(self.core.schema_version())),
            ("psycopg", self.core.psycopg.__version__),
        ]

    def sqlite_vec_version(self) -> str:
        """(The doctor asks the SQLite store this; here it is pgvector's.)"""
        ext = self.conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        return f"pgvector {ext[0]}" if ext else "pgvector missing"

    def fact_traces(self, fact_id: int) -> dict[str, int]:
        def count(sql: str, *args: Any) -> int:
            return self.conn.execute(sql, args).fetchone()[0]

        out = {
            "facts": count("SELECT count(*) FROM facts WHERE id = %s", fact_id),
            "fact_fts": count("SELECT count(*) FROM fact_fts WHERE fact_id = %s", fact_id),
            "fact_tags": count("SELECT count(*) FROM fact_tags WHERE fact_id = %s", fact_id),
            "sentence_vec": count("SELECT count(*) FROM sentence_vec WHERE fact_id = %s", fact_id),
            "fact_entities": count(
                "SELECT count(*) FROM fact_entities WHERE fact_id = %s", fact_id
            ),
            "links": count(
                "SELECT count(*) FROM links WHERE from_fact = %s OR to_fact = %s", fact_id, fact_id
            ),
            "superseded_by": count("SELECT count(*) FROM facts WHERE superseded_by = %s", fact_id),
        }
        out["fact_vec"] = int(self.vectors.has_vector(fact_id))
        return out

    def row_counts(self) -> dict[str, int]:
        out = {}
        for table in sorted(schema.MEM_TABLES - {"fact_vec", "reembed_staging", "meta"}):
            out[table] = self.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        if self.vectors.has_vectors():
            out["fact_vec"] = self.conn.execute("SELECT count(*) FROM fact_vec").fetchone()[0]
        return out


def _json_is(raw: str, kind: type) -> bool:
    try:
        value = json.loads(raw)
    except (ValueError, TypeError):
        return False
    if not isinstance(value, kind):
        return False
    return kind is not list or all(isinstance(t, str) for t in value)
