"""Documents and their chunks, and the atomic replacement of a document.

A retain call writes the documents it brings into a staging bank of its own, batch by batch;
recall never reads a staging bank, so until `publish_staging` the old version stays whole and
the new one is invisible. Publishing is one transaction: each staged document's live
namesake is deleted and the staged rows move into the real bank. A call that is interrupted
drops its staging bank; one killed outright leaves it behind, and the next writer purges it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from memcli.store.banks import BanksPart
from memcli.store.core import StoreCore
from memcli.store.facts import FactsPart
from memcli.store.types import batched, iso, marks
from memcli.store.vectors import VectorsPart


class DocumentsPart:
    """store.documents: documents and their chunks, and the staging banks that replace a
    document's version atomically."""

    def __init__(
        self, core: StoreCore, facts: FactsPart, vectors: VectorsPart, banks: BanksPart
    ) -> None:
        self.core = core
        self.conn = core.conn
        self.facts = facts
        self.vectors = vectors
        self.banks = banks

    def document_row(self, bank_id: int, external_id: str) -> int | None:
        row = self.conn.execute(
            "SELECT id FROM documents WHERE bank_id = ? AND external_id = ?",
            (bank_id, external_id),
        ).fetchone()
        return row[0] if row else None

    def ensure_document(self, bank_id: int, external_id: str, now: datetime) -> int:
        row = self.document_row(bank_id, external_id)
        if row is not None:
            return row
        self.conn.execute(
            "INSERT INTO documents(bank_id, external_id, created_at) VALUES(?, ?, ?)",
            (bank_id, external_id, iso(now)),
        )
        return self.conn.last_insert_rowid()

    def document_fact_ids(self, document_row: int) -> list[int]:
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM facts WHERE document_id = ? ORDER BY id", (document_row,)
            )
        ]

    def delete_document(self, document_row: int) -> dict[str, int]:
        counts = self.facts.delete_facts(self.document_fact_ids(document_row))
        self.conn.execute("DELETE FROM chunks WHERE document_id = ?", (document_row,))
        self.conn.execute("DELETE FROM documents WHERE id = ?", (document_row,))
        return counts

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
        for batch in batched(list(chunk_ids)):
            out.update(
                self.conn.execute(
                    f"SELECT id, text FROM chunks WHERE id IN ({marks(len(batch))})", batch
                )
            )
        return out

    def delete_empty_documents(self, bank_id: int) -> int:
        """Documents of the bank no fact belongs to any more, and their chunks. Inside
        atomic()."""
        empty = [
            r[0]
            for r in self.conn.execute(
                "SELECT d.id FROM documents d WHERE d.bank_id = ? "
                "AND NOT EXISTS (SELECT 1 FROM facts f WHERE f.document_id = d.id)",
                (bank_id,),
            )
        ]
        for batch in batched(empty):
            m = marks(len(batch))
            self.conn.execute(f"DELETE FROM chunks WHERE document_id IN ({m})", batch)
            self.conn.execute(f"DELETE FROM documents WHERE id IN ({m})", batch)
        return len(empty)

    # -- staging --------------------------------------------------------------------------

    def publish_staging(self, staging_bank: int, bank_id: int) -> list[str]:
        """Swap every document staged in staging_bank into bank_id, replacing live documents
        of the same id; returns the ids of the documents that replaced an older version.
        Call inside atomic()."""
        replaced: list[str] = []
        staged = self.conn.execute(
            "SELECT id, external_id FROM documents WHERE bank_id = ?", (staging_bank,)
        ).fetchall()
        for row, external_id in staged:
            live = self.document_row(bank_id, external_id)
            if live is not None:
                # A correction the old version held goes with it, as a forget of it would:
                # what it closed is valid again, unless the new version says the same.
                old_ids = self.document_fact_ids(live)
                same = self._same_content(old_ids, row)
                self.facts.reopen_superseded(old_ids, same)
                self._carry_closed_state(old_ids, row, same)
                self.delete_document(live)
                replaced.append(external_id)
            self.conn.execute("UPDATE documents SET bank_id = ? WHERE id = ?", (bank_id, row))
        moved = [
            r[0]
            for r in self.conn.execute("SELECT id FROM facts WHERE bank_id = ?", (staging_bank,))
        ]
        self.conn.execute("UPDATE facts SET bank_id = ? WHERE bank_id = ?", (bank_id, staging_bank))
        self.conn.execute(
            "UPDATE chunks SET bank_id = ? WHERE bank_id = ?", (bank_id, staging_bank)
        )
        self.vectors.move_vectors(moved, bank_id)
        self.conn.execute("DELETE FROM banks WHERE id = ?", (staging_bank,))
        self.banks.release_staging_lock(staging_bank)
        return replaced

    # A new version's fact "says the same" as an old one when its words, speaker and type
    # are the same: a document retained again is retained at another time, so its facts'
    # content hashes (which hold the times) differ.
    _SAME_SAYING = "n.text = o.text AND n.context IS o.context AND n.fact_type = o.fact_type"

    def _same_content(self, fact_ids: Sequence[int], document_row: int) -> dict[int, int]:
        """Of these facts, those the document says again (_SAME_SAYING): id -> the first
        such fact of the document."""
        return dict(
            self.conn.execute(
                "SELECT o.id, min(n.id) FROM json_each(?) AS j JOIN facts o ON o.id = j.value "
                f"JOIN facts n ON n.document_id = ? AND {self._SAME_SAYING} GROUP BY o.id",
                (json.dumps(list(fact_ids)), document_row),
            ).fetchall()
        )

    def _carry_closed_state(
        self, fact_ids: Sequence[int], document_row: int, same: dict[int, int]
    ) -> None:
        """A fact of the old version that a later fact had corrected: the new version's
        facts that say the same (_SAME_SAYING) are closed as it was, so the correction still
        holds. A correction from outside the old version stays the corrector; one inside it
        (appended with --supersedes) holds when the new version says it again (`same`: old
        fact id -> the new fact saying it), and that new fact becomes the corrector; it closes
        the new fact said at the corrected one's time (an undated document, dated anew, keeps
        it open). Inside atomic()."""
        old = json.dumps(list(fact_ids))
        self.conn.execute(
            "UPDATE facts AS n SET invalid_at = o.invalid_at, superseded_by = o.superseded_by "
            "FROM json_each(?) AS j JOIN facts o ON o.id = j.value "
            f"WHERE n.document_id = ? AND {self._SAME_SAYING} "
            "AND o.invalid_at IS NOT NULL AND n.invalid_at IS NULL "
            "AND (o.superseded_by IS NULL OR o.superseded_by NOT IN "
            "(SELECT value FROM json_each(?)))",
            (old, document_row, old),
        )
        # Said at the same time too: the same words said on another date in the document
        # are another memory, which the correction did not close.
        self.conn.execute(
            "UPDATE facts AS n SET invalid_at = o.invalid_at, superseded_by = m.value "
            "FROM json_each(?) AS j JOIN facts o ON o.id = j.value "
            "JOIN json_each(?) AS m ON CAST(m.key AS INTEGER) = o.superseded_by "
            f"WHERE n.document_id = ? AND {self._SAME_SAYING} "
            "AND n.mentioned_at = o.mentioned_at "
            "AND o.invalid_at IS NOT NULL AND n.invalid_at IS NULL AND n.id != m.value",
            (old, json.dumps({str(k): v for k, v in same.items()}), document_row),
        )

    def discard_staging(self, staging_bank: int) -> dict[str, int]:
        """Drop a staging bank and all it holds; returns delete_facts' counts of what went
        (facts, links, entities left with no fact, chunks). Call inside atomic()."""
        owner = self.conn.execute(
            "SELECT owner FROM banks WHERE id = ?", (staging_bank,)
        ).fetchone()
        counts = self.facts.delete_facts(self.facts.fact_ids_of_bank(staging_bank))
        self.conn.execute("DELETE FROM chunks WHERE bank_id = ?", (staging_bank,))
        self.conn.execute("DELETE FROM documents WHERE bank_id = ?", (staging_bank,))
        self.conn.execute("DELETE FROM banks WHERE id = ?", (staging_bank,))
        # Ours: let go of it; a killed owner's (nobody holds it): its file goes too.
        self.banks.release_staging_lock(staging_bank)
        lock = self.banks.staging_lock_of(owner[0] if owner else None)
        if lock is not None:
            lock.unlink(missing_ok=True)
        return counts

    def purge_abandoned_staging(self) -> int:
        """Drop staging banks left by killed processes, and lock files no staging bank owns
        and nobody holds (a process killed before its staging bank's row committed). Call
        inside atomic(): a new staging bank's row and lock come in its owner's write."""
        banks = self.banks.abandoned_staging_banks()
        for staging_bank in banks:
            self.discard_staging(staging_bank)
        self.banks.remove_orphan_staging_locks()
        return len(banks)
