"""Fact embeddings in one sqlite-vec table (cosine), partitioned by bank.

Every bank records the embedder that made its vectors, by fingerprint (a hash of the model's
weights, not its file name): vectors of two models in one bank would be silently meaningless,
so a mismatch is an error that names the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memcli.store.types import StoreError, batched, marks


def same_model_name(recorded: str, name: str) -> bool:
    """Whether a bank's recorded embedder name (from before fingerprints) means this model.
    Older versions recorded the file stem of the converted cache ("all-MiniLM-L6-v2-53aa51172d14
    -f16"), today's record the model's own name ("all-MiniLM-L6-v2")."""
    return recorded == name or recorded.startswith(name + "-")


class VectorsMixin:
    conn: Any
    path: Any

    def vector_dim(self) -> int | None:
        value = self.get_meta("embedding_dim")  # type: ignore[attr-defined]
        return int(value) if value else None

    def has_vectors(self) -> bool:
        return self.vector_dim() is not None

    def ensure_vectors(self, bank_id: int, name: str, fingerprint: str | None, dim: int) -> None:
        """Create the vector table on first use, and bind the bank to this embedder (or check
        that it is the one the bank was made with). Call inside atomic()."""
        have_dim = self.vector_dim()
        if have_dim is None:
            self.conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS fact_vec USING vec0("
                "fact_id INTEGER PRIMARY KEY, bank_id INTEGER PARTITION KEY, fact_type TEXT, "
                f"embedding float[{int(dim)}] distance_metric=cosine)"
            )
            self.set_meta("embedding_dim", str(dim))  # type: ignore[attr-defined]
            self.set_meta("embedder", name)  # type: ignore[attr-defined]
        elif have_dim != dim:
            raise StoreError(
                f"{self.path} holds {have_dim}-dimensional vectors; {name} makes {dim}: "
                "use another --db for it"
            )
        self.check_embedder(bank_id, name, fingerprint, record=True)

    def check_embedder(
        self, bank_id: int, name: str, fingerprint: str | None, *, record: bool = False
    ) -> None:
        """Raise when the bank was embedded by another model. With record, a bank that has
        no fingerprint yet (new, or made before fingerprints) takes this one's."""
        have_name, have_fp = self.bank_embedder(bank_id)  # type: ignore[attr-defined]
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
            self.set_bank_embedder(bank_id, name, fingerprint)  # type: ignore[attr-defined]

    def bank_has_vectors(self, bank_id: int) -> bool:
        if not self.has_vectors():
            return False
        return (
            self.conn.execute(
                "SELECT 1 FROM facts WHERE bank_id = ? LIMIT 1", (bank_id,)
            ).fetchone()
            is not None
        )

    def add_vector(self, fact_id: int, bank_id: int, fact_type: str, embedding: Any) -> None:
        self.conn.execute(
            "INSERT INTO fact_vec(fact_id, bank_id, fact_type, embedding) VALUES(?, ?, ?, ?)",
            (fact_id, bank_id, fact_type, np.asarray(embedding, dtype=np.float32).tobytes()),
        )

    def delete_vectors(self, fact_ids: Sequence[int]) -> None:
        if not self.has_vectors():
            return
        for batch in batched(list(fact_ids)):
            self.conn.execute(f"DELETE FROM fact_vec WHERE fact_id IN ({marks(len(batch))})", batch)

    def move_vectors(self, fact_ids: Sequence[int], bank_id: int) -> None:
        """Give vectors another partition (vec0 cannot update a partition key in place)."""
        if not self.has_vectors():
            return
        for batch in batched(list(fact_ids)):
            m = marks(len(batch))
            rows = self.conn.execute(
                f"SELECT fact_id, fact_type, embedding FROM fact_vec WHERE fact_id IN ({m})",
                batch,
            ).fetchall()
            self.conn.execute(f"DELETE FROM fact_vec WHERE fact_id IN ({m})", batch)
            self.conn.executemany(
                "INSERT INTO fact_vec(fact_id, bank_id, fact_type, embedding) VALUES(?, ?, ?, ?)",
                [(fid, bank_id, ftype, blob) for fid, ftype, blob in rows],
            )

    def vectors_for(self, fact_ids: Sequence[int]) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        if not self.has_vectors():
            return out
        for batch in batched(list(fact_ids)):
            for fid, blob in self.conn.execute(
                f"SELECT fact_id, embedding FROM fact_vec WHERE fact_id IN ({marks(len(batch))})",
                batch,
            ):
                out[fid] = np.frombuffer(blob, dtype=np.float32)
        return out

    def nearest(
        self, bank_id: int, vec: np.ndarray, k: int, fact_type: str | None = None
    ) -> list[tuple[int, float]]:
        """The k facts of the bank nearest to vec as (fact id, cosine), best first."""
        if not self.has_vectors() or k <= 0:
            return []
        blob = np.asarray(vec, dtype=np.float32).tobytes()
        if fact_type is None:
            rows = self.conn.execute(
                "SELECT fact_id, distance FROM fact_vec WHERE embedding MATCH ? AND k = ? "
                "AND bank_id = ?",
                (blob, k, bank_id),
            )
        else:
            rows = self.conn.execute(
                "SELECT fact_id, distance FROM fact_vec WHERE embedding MATCH ? AND k = ? "
                "AND bank_id = ? AND fact_type = ?",
                (blob, k, bank_id, fact_type),
            )
        return [(fid, 1.0 - distance) for fid, distance in rows]

    def bank_vectors(self, bank_id: int) -> tuple[np.ndarray, np.ndarray]:
        """All (ids, unit vectors) of one bank (re-embedding, export)."""
        dim = self.vector_dim() or 0
        if not dim:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        rows = self.conn.execute(
            "SELECT fact_id, embedding FROM fact_vec WHERE bank_id = ?", (bank_id,)
        ).fetchall()
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        vecs = (
            np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, dim)
            if rows
            else np.zeros((0, dim), dtype=np.float32)
        )
        return ids, vecs
