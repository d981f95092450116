"""store.vectors on PostgreSQL: fact vectors in one pgvector table (fact_vec, cosine), the
embedder each bank was made with, and nearest-neighbour searches.

Two ways to find a bank's nearest facts, chosen by the bank's size:
- exact: every vector of the bank (found by the fact_vec_bank index) ranked by its cosine
  distance, the SQL fenced (OFFSET 0) so the planner cannot take the HNSW index. A bank of up
  to EXACT_SCAN_MAX vectors costs a few milliseconds, and gives the true top k.
- HNSW (fact_vec_hnsw, over every bank): the index's candidates, hnsw.ef_search of them,
  filtered to the bank and ranked by their exact distance (the index's order is itself
  approximate). When fewer than k of the candidates pass (the bank is a small share of the
  table, or a filter), the exact scan answers instead, so a search never returns fewer
  results than there are.
The approximate side: HNSW may miss a true neighbour that the exact scan would find; exact
scans below EXACT_SCAN_MAX mean the benchmark banks (a conversation each) are exact.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memcli.store.postgres import schema
from memcli.store.postgres.core import PgCore, Vec
from memcli.store.postgres.sql import filter_sql
from memcli.store.types import FACT_TYPES, StoreError
from memcli.store.vectors import same_model_name

# Banks of at most this many vectors are searched exactly (see the module docstring).
EXACT_SCAN_MAX = 20_000
# HNSW candidates per search: ef_search = clamp(EF_FACTOR x k, EF_MIN, EF_MAX) (pgvector
# takes at most 1000).
EF_FACTOR = 2
EF_MIN = 100
EF_MAX = 1000
# How long a bank's vector count is trusted for choosing the way (it only chooses).
COUNT_TTL_S = 30.0


class PgVectors:
    def __init__(self, core: PgCore) -> None:
        self.core = core
        self.conn = core.conn
        self._dim: int | None = None
        self._ef_search: int | None = None
        self._bank_sizes: dict[int, tuple[float, int]] = {}

    # -- the table --------------------------------------------------------------------------

    def vector_dim(self) -> int | None:
        if self._dim is None:
            value = self.core.get_meta("embedding_dim")
            self._dim = int(value) if value else None
        return self._dim

    def has_vectors(self) -> bool:
        return self.vector_dim() is not None

    def store_embedder(self) -> str | None:
        return self.core.get_meta("embedder")

    def ensure_vectors(self, bank_id: int, name: str, fingerprint: str | None, dim: int) -> None:
        self._dim = None  # another process may have made the table since
        have_dim = self.vector_dim()
        if have_dim is None:
            self.make_table(dim)
            self.core.set_meta("embedder", name)
        elif have_dim != dim:
            raise StoreError(
                f"{self.core.path} holds {have_dim}-dimensional vectors; {name} makes {dim}: "
                "use another --db for it"
            )
        self.check_embedder(bank_id, name, fingerprint, record=True)

    def make_table(self, dim: int) -> None:
        for sql in schema.vector_table_sql(dim):
            self.conn.execute(sql)
        self.core.set_meta("embedding_dim", str(dim))
        self._dim = dim
        self.core.on_rollback(self._forget_dim)

    def drop_table(self) -> None:
        self.conn.execute("DROP TABLE fact_vec")
        self.conn.execute("DELETE FROM sentence_vec")
        self.core.delete_meta("embedding_dim")
        self._dim = None
        self.core.on_rollback(self._forget_dim)

    def _forget_dim(self) -> None:
        self._dim = None

    def check_embedder(
        self, bank_id: int, name: str, fingerprint: str | None, *, record: bool = False
    ) -> None:
        have_name, have_fp = self.bank_embedder(bank_id)
        if have_fp is not None:
            if fingerprint is not None and have_fp != fingerprint:
                raise StoreError(
                    f"this bank was embedded with {have_name} ({have_fp[:12]}), not "
                    f"{name} ({fingerprint[:12]}): use --embedder {have_name} or re-embed "
                    "the bank with `mem reembed`"
                )
            return
        if (
            have_name is not None
            and not same_model_name(have_name, name)
            and self.bank_has_vectors(bank_id)
        ):
            raise StoreError(
                f"this bank was embedded with {have_name}, not {name}: use --embedder "
                f"{have_name} or re-embed the bank with `mem reembed`"
            )
        if record:
            self.set_bank_embedder(bank_id, name, fingerprint)

    def bank_embedder(self, bank_id: int) -> tuple[str | None, str | None]:
        row = self.conn.execute(
            "SELECT embedder, embedder_fingerprint FROM banks WHERE id = %s", (bank_id,)
        ).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def set_bank_embedder(self, bank_id: int, name: str, fingerprint: str | None) -> None:
        self.conn.execute(
            "UPDATE banks SET embedder = %s, embedder_fingerprint = %s WHERE id = %s",
            (name, fingerprint, bank_id),
        )

    def has_vector(self, fact_id: int) -> bool:
        if not self.has_vectors():
            return False
        return (
            self.conn.execute("SELECT 1 FROM fact_vec WHERE fact_id = %s", (fact_id,)).fetchone()
            is not None
        )

    def bank_has_vectors(self, bank_id: int) -> bool:
        if not self.has_vectors():
            return False
        return (
            self.conn.execute(
                "SELECT 1 FROM facts WHERE bank_id = %s LIMIT 1", (bank_id,)
            ).fetchone()
            is not None
        )

    # -- writes -----------------------------------------------------------------------------

    def add_vector(self, fact_id: int, bank_id: int, fact_type: str, embedding: Any) -> None:
        self.conn.execute(
            "INSERT INTO fact_vec(fact_id, bank_id, fact_type, embedding) VALUES(%s, %s, %s, %s)",
            (fact_id, bank_id, fact_type, Vec(embedding)),
        )

    def add_sentence_vectors(
        self, fact_id: int, bank_id: int, fact_type: str, vectors: Any
    ) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO sentence_vec(fact_id, bank_id, fact_type, embedding) "
                "VALUES(%s, %s, %s, %s)",
                [(fact_id, bank_id, fact_type, Vec(row)) for row in vectors],
            )

    def sentence_vectors(self, fact_ids: Sequence[int]) -> dict[int, np.ndarray]:
        if self.core.version_at_open < schema.SENTENCE_VECTORS_VERSION:
            return {}
        found: dict[int, list[np.ndarray]] = {}
        for fid, vec in self.conn.execute(
            "SELECT fact_id, embedding FROM sentence_vec WHERE fact_id = ANY(%s) "
            "ORDER BY fact_id, id",
            ([int(i) for i in fact_ids],),
        ):
            found.setdefault(fid, []).append(np.asarray(vec, dtype=np.float32))
        return {fid: np.stack(rows) for fid, rows in found.items()}

    def delete_vectors(self, fact_ids: Sequence[int]) -> None:
        if self.has_vectors():
            ids = [int(i) for i in fact_ids]
            self.conn.execute("DELETE FROM fact_vec WHERE fact_id = ANY(%s)", (ids,))
            self.conn.execute("DELETE FROM sentence_vec WHERE fact_id = ANY(%s)", (ids,))

    def move_vectors(self, fact_ids: Sequence[int], bank_id: int) -> None:
        if self.has_vectors():
            ids = [int(i) for i in fact_ids]
            for table in ("fact_vec", "sentence_vec"):
                self.conn.execute(
                    f"UPDATE {table} SET bank_id = %s WHERE fact_id = ANY(%s)", (bank_id, ids)
                )

    def nearest_sentences(
        self, bank_id: int, vec: np.ndarray, k: int, fact_types: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """Every sentence vector of the bank ranked exactly (the table has no index: a
        bank's sentences are a share of its facts), best per fact."""
        if (
            k <= 0
            or not self.has_vectors()
            or self.core.version_at_open < schema.SENTENCE_VECTORS_VERSION
        ):
            return []
        wanted = None if fact_types is None or set(FACT_TYPES) <= set(fact_types) else fact_types
        type_cond = "" if wanted is None else " AND fact_type = ANY(%s)"
        type_args = () if wanted is None else (list(wanted),)
        rows = self.conn.execute(
            "SELECT fact_id, min(embedding <=> %s) AS d FROM sentence_vec "
            f"WHERE bank_id = %s{type_cond} GROUP BY fact_id ORDER BY d, fact_id LIMIT %s",
            (Vec(np.asarray(vec, dtype=np.float32)), bank_id, *type_args, k),
        ).fetchall()
        return [(int(fid), 1.0 - float(d)) for fid, d in rows]

    def forget_deleted(self) -> None:
        """Facts were deleted (their vectors cascade): nothing is cached about them."""

    def forget_scans(self) -> None:
        """Nothing is cached per bank but its size (which only chooses the way)."""
        self._bank_sizes = {}

    # -- reads ------------------------------------------------------------------------------

    def vectors_for(
        self, fact_ids: Sequence[int], bank_id: int | None = None
    ) -> dict[int, np.ndarray]:
        if not self.has_vectors():
            return {}
        ids = [int(i) for i in fact_ids]
        bank_cond = "" if bank_id is None else " AND bank_id = %s"
        bank_args = () if bank_id is None else (bank_id,)
        return dict(
            self.conn.execute(
                f"SELECT fact_id, embedding FROM fact_vec WHERE fact_id = ANY(%s){bank_cond}",
                (ids, *bank_args),
            ).fetchall()
        )

    def fact_vectors(self, bank_id: int, fact_ids: Sequence[int]) -> np.ndarray | None:
        """These facts' vectors as a matrix in their order (zeros for one without)."""
        dim = self.vector_dim()
        if not dim:
            return None
        ids = [int(i) for i in fact_ids]
        found = self.vectors_for(ids, bank_id)
        out = np.zeros((len(ids), dim), dtype=np.float32)
        for row, fid in enumerate(ids):
            vec = found.get(fid)
            if vec is not None:
                out[row] = vec
        return out

    def bank_vectors(self, bank_id: int) -> tuple[np.ndarray, np.ndarray]:
        dim = self.vector_dim() or 0
        rows = (
            self.conn.execute(
                "SELECT fact_id, embedding FROM fact_vec WHERE bank_id = %s ORDER BY fact_id",
                (bank_id,),
            ).fetchall()
            if dim
            else []
        )
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        vecs = np.stack([r[1] for r in rows]) if rows else np.zeros((0, dim), dtype=np.float32)
        return ids, vecs

    def prepare_vector_search(self, bank_id: int, *, sentences: bool = False) -> None:
        """Nothing to read ahead: the server keeps the index."""
        return None

    def search_with(self, bank_id: int, scan: Any) -> None:
        """No scan is lent between connections on PostgreSQL."""

    def _bank_size(self, bank_id: int) -> int:
        now = time.monotonic()
        hit = self._bank_sizes.get(bank_id)
        if hit is not None and now - hit[0] < COUNT_TTL_S:
            return hit[1]
        n = self.conn.execute(
            "SELECT count(*) FROM fact_vec WHERE bank_id = %s", (bank_id,)
        ).fetchone()[0]
        self._bank_sizes[bank_id] = (now, n)
        return n

    def _set_ef_search(self, ef: int) -> None:
        if self._ef_search != ef:
            self.conn.execute(f"SET hnsw.ef_search = {int(ef)}")
            self._ef_search = ef

    def _search(
        self,
        where: str,
        params: Sequence[Any],
        query: np.ndarray,
        k: int,
        *,
        exact: bool,
        join_facts: bool = False,
    ) -> list[tuple[int, float]]:
        """The k rows of fact_vec v (joined to facts f when asked) that pass `where`,
        nearest to query, as (fact id, cosine) best first (ties: the lower id)."""
        vec = Vec(query)
        source = "fact_vec v JOIN facts f ON f.id = v.fact_id" if join_facts else "fact_vec v"
        if exact:
            rows = self.conn.execute(
                "SELECT fact_id, d FROM (SELECT v.fact_id, v.embedding <=> %s AS d "
                f"FROM {source} WHERE {where} OFFSET 0) s ORDER BY d, fact_id LIMIT %s",
                (vec, *params, k),
            ).fetchall()
            return [(fid, 1.0 - d) for fid, d in rows]
        ef = min(EF_MAX, max(EF_MIN, EF_FACTOR * k))
        self._set_ef_search(ef)
        # The index's ef candidates over every bank (the inner query has the form HNSW
        # serves: ORDER BY distance LIMIT, no condition), then the bank and filters.
        rows = self.conn.execute(
            f"SELECT c.fact_id, c.d FROM (SELECT v.fact_id, v.embedding <=> %s AS d "
            "FROM fact_vec v ORDER BY v.embedding <=> %s LIMIT %s) c "
            f"JOIN {source} ON v.fact_id = c.fact_id WHERE {where}",
            (vec, vec, ef, *params),
        ).fetchall()
        rows.sort(key=lambda r: (r[1], r[0]))  # by exact distance: the index's order is not
        return [(fid, 1.0 - d) for fid, d in rows[:k]]

    def nearest(
        self, bank_id: int, vec: np.ndarray, k: int, fact_types: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        if not self.has_vectors() or k <= 0:
            return []
        query = np.asarray(vec, dtype=np.float32)
        wanted = None if fact_types is None or set(FACT_TYPES) <= set(fact_types) else fact_types
        where = "v.bank_id = %s"
        params: list[Any] = [bank_id]
        if wanted is not None:
            where += " AND v.fact_type = ANY(%s)"
            params.append(list(wanted))
        size = self._bank_size(bank_id)
        if size <= EXACT_SCAN_MAX:
            return self._search(where, params, query, k, exact=True)
        found = self._search(where, params, query, k, exact=False)
        if len(found) < k:
            return self._search(where, params, query, k, exact=True)
        return found

    def nearest_among(
        self, bank_id: int, vec: np.ndarray, fact_ids: Sequence[int] | np.ndarray, k: int
    ) -> list[tuple[int, float]]:
        ids = np.asarray(fact_ids, dtype=np.int64).tolist()
        if not ids or k <= 0 or not self.has_vectors():
            return []
        return self._search(
            "v.bank_id = %s AND v.fact_id = ANY(%s)",
            [bank_id, ids],
            np.asarray(vec, dtype=np.float32),
            k,
            exact=True,
        )

    def nearest_in_window(
        self,
        bank_id: int,
        vec: np.ndarray,
        start: datetime,
        end: datetime,
        flt: Any,
        k: int,
        *,
        probe: bool = True,
        said: tuple[datetime, datetime] | None = None,
    ) -> tuple[list[tuple[int, float]], dict[str, Any]]:
        """The k facts of the bank overlapping [start, end) that pass the filter, nearest to
        vec: one statement, the window's facts found on the time index and ranked by their
        exact distance."""
        if k <= 0 or not self.has_vectors():
            return [], {}
        from memcli.store.postgres.search import window_sql

        rule, rule_params = window_sql(start, end, said)
        cond, params = filter_sql(flt, "f")
        found = self._search(
            f"f.bank_id = %s AND v.bank_id = %s AND {rule}{cond}",
            [bank_id, bank_id, *rule_params, *params],
            np.asarray(vec, dtype=np.float32),
            k,
            exact=True,
            join_facts=True,
        )
        return found, {"exact": True}

    def nearest_earlier(
        self,
        bank_ids: Sequence[int],
        fact_ids: Sequence[int],
        vectors: np.ndarray,
        k: int,
        exclude: set[int],
        floor: float = -1.0,
    ) -> list[list[tuple[int, float]]]:
        """For each (fact id, vector): its k nearest facts of these banks with a lower id,
        not excluded, at cosine >= floor. One statement a fact, sent together (pipeline)."""
        if not len(fact_ids) or k <= 0 or not self.has_vectors():
            return [[] for _ in fact_ids]
        queries = np.asarray(vectors, dtype=np.float32).reshape(len(fact_ids), -1)
        banks = [int(b) for b in bank_ids]
        excluded = sorted(int(i) for i in exclude)
        exact = sum(self._bank_size(b) for b in banks) <= EXACT_SCAN_MAX
        where = "v.bank_id = ANY(%s) AND v.fact_id < %s AND NOT v.fact_id = ANY(%s)"
        out = []
        for fid, query in zip(fact_ids, queries):
            params = [banks, int(fid), excluded]
            found = self._search(where, params, query, k, exact=exact)
            if not exact and len(found) < k:
                found = self._search(where, params, query, k, exact=True)
            out.append([(other, cos) for other, cos in found if cos >= floor])
        return out

    def index_health(self) -> dict[str, Any]:
        """The HNSW index: whether it is valid and ready (doctor)."""
        row = self.conn.execute(
            "SELECT i.indisvalid, i.indisready FROM pg_index i JOIN pg_class c "
            "ON c.oid = i.indexrelid WHERE c.relname = 'fact_vec_hnsw' "
            "AND c.relnamespace = current_schema()::regnamespace"
        ).fetchone()
        return {"present": row is not None, "valid": bool(row and row[0] and row[1])}
