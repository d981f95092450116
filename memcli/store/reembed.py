"""The staging table of a re-embedding (memcli/lifecycle.py reembed): vectors of a new model
for a bank's facts, staged in batches that each commit, so an interrupted run resumes, and
swapped in for the bank's vectors in one transaction."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from memcli.store.core import StoreCore
from memcli.store.facts import FactsPart
from memcli.store.types import PAGE, batched, marks
from memcli.store.vectors import VectorsPart

# Held outside any migration on purpose: it exists only while a re-embedding is under way
# (vectors of the new model, waiting to replace the bank's in one transaction).
_REEMBED_TABLE = (
    "CREATE TABLE IF NOT EXISTS reembed_staging("
    "fact_id INTEGER PRIMARY KEY, bank_id INTEGER NOT NULL, embedding BLOB NOT NULL)"
)


class ReembedPart:
    """store.reembed: a bank's re-embedding, staged and swapped in."""

    def __init__(self, core: StoreCore, vectors: VectorsPart, facts: FactsPart) -> None:
        self.core = core
        self.conn = core.conn
        self.vectors = vectors
        self.facts = facts

    def embedding_inputs(
        self, bank_id: int, after_id: int, limit: int, skip_staged: bool = False
    ) -> list[
        tuple[int, str, str | None, str | None, str | None, str, str | None, list[list[str]]]
    ]:
        """What a fact's embedding is computed from, for the next facts by id: (id, text,
        context, occurred_start, occurred_end, lead-in as indexed, section, spellings of each
        entity)."""
        staged = (
            " AND NOT EXISTS (SELECT 1 FROM reembed_staging s WHERE s.fact_id = f.id)"
            if skip_staged and self.core.has_table("reembed_staging")
            else ""
        )
        rows = self.conn.execute(
            "SELECT f.id, f.text, f.context, f.occurred_start, f.occurred_end, x.lead_in, "
            "CASE WHEN json_type(f.metadata, '$.section') = 'text' "
            "THEN json_extract(f.metadata, '$.section') END "
            "FROM facts f LEFT JOIN fact_fts x ON x.rowid = f.id "
            f"WHERE +f.bank_id = ? AND f.id > ?{staged} ORDER BY f.id LIMIT ?",
            (bank_id, after_id, limit),
        ).fetchall()
        spellings: dict[int, list[list[str]]] = {}
        for batch in batched([r[0] for r in rows]):
            for fid, name, aliases in self.conn.execute(
                "SELECT fe.fact_id, e.name, e.aliases FROM fact_entities fe JOIN entities e "
                f"ON e.id = fe.entity_id WHERE fe.fact_id IN ({marks(len(batch))}) "
                "ORDER BY fe.fact_id, e.id",
                batch,
            ):
                spellings.setdefault(fid, []).append([name, *json.loads(aliases)])
        return [(*r, spellings.get(r[0], [])) for r in rows]  # type: ignore[misc]

    def reembed_state(self, bank_id: int) -> dict[str, Any] | None:
        value = self.core.get_meta(f"reembed:{bank_id}")
        return json.loads(value) if value else None

    def begin_reembed(self, bank_id: int, state: dict[str, Any]) -> None:
        """Start (or restart, dropping what another model staged) a re-embedding."""
        self.conn.execute(_REEMBED_TABLE)
        self.conn.execute("DELETE FROM reembed_staging WHERE bank_id = ?", (bank_id,))
        self.core.set_meta(f"reembed:{bank_id}", json.dumps(state))

    def staged_count(self, bank_id: int) -> int:
        if not self.core.has_table("reembed_staging"):
            return 0
        return self.conn.execute(
            "SELECT count(*) FROM reembed_staging s CROSS JOIN facts f ON f.id = s.fact_id "
            "WHERE s.bank_id = ?",
            (bank_id,),
        ).fetchone()[0]

    def stage_vectors(self, bank_id: int, rows: Sequence[tuple[int, bytes]]) -> None:
        self.conn.executemany(
            "INSERT OR REPLACE INTO reembed_staging(fact_id, bank_id, embedding) VALUES(?, ?, ?)",
            [(fid, bank_id, blob) for fid, blob in rows],
        )

    def other_banks_with_vectors(self, bank_id: int) -> list[str]:
        if self.core.get_meta("embedding_dim") is None:
            return []
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT b.name FROM banks b WHERE b.id != ? AND EXISTS "
                "(SELECT 1 FROM facts f WHERE f.bank_id = b.id) ORDER BY b.name",
                (bank_id,),
            )
        ]

    def swap_in_staged_vectors(
        self, bank_id: int, name: str, fingerprint: str | None, dim: int
    ) -> int:
        """Replace the bank's vectors with the staged ones and record the new embedder.
        Inside atomic(). Returns how many vectors were swapped in."""
        have_dim = self.vectors.vector_dim()
        if have_dim is not None and have_dim != dim:
            # Only possible when no other bank has vectors (checked before embedding).
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
                "CROSS JOIN facts f ON f.id = s.fact_id WHERE s.bank_id = ? AND s.fact_id > ? "
                "ORDER BY s.fact_id LIMIT ?",
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
        self.conn.execute("DELETE FROM reembed_staging WHERE bank_id = ?", (bank_id,))
        self.core.delete_meta(f"reembed:{bank_id}")
        self.vectors.set_bank_embedder(bank_id, name, fingerprint)
        self.core.set_meta("embedder", name)
        return swapped

    def forget_bank(self, bank_id: int) -> None:
        """Drop what a re-embedding of the bank staged (the bank is being deleted). Inside
        atomic()."""
        if self.core.has_table("reembed_staging"):
            self.conn.execute("DELETE FROM reembed_staging WHERE bank_id = ?", (bank_id,))
        self.core.delete_meta(f"reembed:{bank_id}")
