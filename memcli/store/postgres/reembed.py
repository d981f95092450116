"""store.reembed on PostgreSQL: a bank's re-embedding, new vectors staged in batches (each
its own commit, so an interrupted run resumes) and swapped in at once (store/reembed.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from memcli.store.postgres.core import PgCore
from memcli.store.postgres.schema import REEMBED_TABLE
from memcli.store.types import PAGE


class PgReembed:
    def __init__(self, core: PgCore, vectors: Any, facts: Any) -> None:
        self.core = core
        self.conn = core.conn
        self.vectors = vectors
        self.facts = facts

    def embedding_inputs(
        self, bank_id: int, after_id: int, limit: int, skip_staged: bool = False
    ) -> list[
        tuple[int, str, str | None, str | None, str | None, str, str | None, list[list[str]]]
    ]:
        staged = (
            " AND NOT EXISTS (SELECT 1 FROM reembed_staging s WHERE s.fact_id = f.id)"
            if skip_staged and self.core.has_table("reembed_staging")
            else ""
        )
        rows = self.conn.execute(
            "SELECT f.id, f.text, f.context, f.occurred_start, f.occurred_end, x.lead_in, "
            # metadata.section when it is text (a Markdown note's heading: store/reembed.py)
            "CASE WHEN jsonb_typeof(f.metadata::jsonb -> 'section') = 'string' "
            "THEN f.metadata::jsonb ->> 'section' END "
            "FROM facts f LEFT JOIN fact_fts x ON x.fact_id = f.id "
            f"WHERE f.bank_id = %s AND f.id > %s{staged} ORDER BY f.id LIMIT %s",
            (bank_id, after_id, limit),
        ).fetchall()
        spellings: dict[int, list[list[str]]] = {}
        if rows:
            for fid, name, aliases in self.conn.execute(
                "SELECT fe.fact_id, e.name, e.aliases FROM fact_entities fe JOIN entities e "
                "ON e.id = fe.entity_id WHERE fe.fact_id = ANY(%s) ORDER BY fe.fact_id, e.id",
                ([r[0] for r in rows],),
            ):
                spellings.setdefault(fid, []).append([name, *json.loads(aliases)])
        return [(*r, spellings.get(r[0], [])) for r in rows]  # type: ignore[misc]

    def reembed_state(self, bank_id: int) -> dict[str, Any] | None:
        value = self.core.get_meta(f"reembed:{bank_id}")
        return json.loads(value) if value else None

    def begin_reembed(self, bank_id: int, state: dict[str, Any]) -> None:
        self.conn.execute(REEMBED_TABLE)
        self.conn.execute("DELETE FROM reembed_staging WHERE bank_id = %s", (bank_id,))
        self.core.set_meta(f"reembed:{bank_id}", json.dumps(state))

    def staged_count(self, bank_id: int) -> int:
        if not self.core.has_table("reembed_staging"):
            return 0
        return self.conn.execute(
            "SELECT count(*) FROM reembed_staging s JOIN facts f ON f.id = s.fact_id "
            "WHERE s.bank_id = %s",
            (bank_id,),
        ).fetchone()[0]

    def stage_vectors(self, bank_id: int, rows: Sequence[tuple[int, bytes]]) -> None:
        if not rows:
            return
        self.conn.execute(
            "INSERT INTO reembed_staging(fact_id, bank_id, embedding) "
            "SELECT f, %s, e FROM unnest(%s::bigint[], %s::bytea[]) AS r(f, e) "
            "ON CONFLICT(fact_id) DO UPDATE SET bank_id = excluded.bank_id, "
            "embedding = excluded.embedding",
            (bank_id, [r[0] for r in rows], [bytes(r[1]) for r in rows]),
        )

    def other_banks_with_vectors(self, bank_id: int) -> list[str]:
        if self.core.get_meta("embedding_dim") is None:
            return []
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT b.name FROM banks b WHERE b.id != %s AND EXISTS "
                '(SELECT 1 FROM facts f WHERE f.bank_id = b.id) ORDER BY b.name COLLATE "C"',
                (bank_id,),
            )
        ]

    def swap_in_staged_vectors(
        self, bank_id: int, name: str, fingerprint: str | None, dim: int
    ) -> int:
        self.vectors._dim = None
        have_dim = self.vectors.vector_dim()
        if have_dim is not None and have_dim != dim:
            self.vectors.drop_table()
            have_dim = None
        if have_dim is None:
            self.vectors.make_table(dim)
        else:
            self.vectors.delete_vectors(self.facts.fact_ids_of_bank(bank_id))
        swapped = 0
        last = -1
        while True:
            rows = self.conn.execute(
                "SELECT s.fact_id, f.fact_type, s.embedding FROM reembed_staging s "
                "JOIN facts f ON f.id = s.fact_id WHERE s.bank_id = %s AND s.fact_id > %s "
                "ORDER BY s.fact_id LIMIT %s",
                (bank_id, last, PAGE),
            ).fetchall()
            if not rows:
                break
            for fid, ftype, blob in rows:
                # The fact's own vector, then its sentences' (lifecycle._staged_vectors).
                rows_of = np.frombuffer(blob, dtype=np.float32).reshape(-1, dim)
                self.vectors.add_vector(fid, bank_id, ftype, rows_of[0])
                if len(rows_of) > 1:
                    self.vectors.add_sentence_vectors(fid, bank_id, ftype, rows_of[1:])
            swapped += len(rows)
            last = rows[-1][0]
        self.conn.execute("DELETE FROM reembed_staging WHERE bank_id = %s", (bank_id,))
        self.core.delete_meta(f"reembed:{bank_id}")
        self.vectors.set_bank_embedder(bank_id, name, fingerprint)
        self.core.set_meta("embedder", name)
        return swapped

    def forget_bank(self, bank_id: int) -> None:
        if self.core.has_table("reembed_staging"):
            self.conn.execute("DELETE FROM reembed_staging WHERE bank_id = %s", (bank_id,))
        self.core.delete_meta(f"reembed:{bank_id}")
