"""store.documents on PostgreSQL: documents and their chunks, and the staging banks that
replace a document's version atomically (the rules of store/documents.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memcli.store.postgres.core import PgCore
from memcli.store.types import iso


class PgDocuments:
    def __init__(self, core: PgCore, facts: Any, vectors: Any, banks: Any) -> None:
        self.core = core
        self.conn = core.conn
        self.facts = facts
        self.vectors = vectors
        self.banks = banks

    def document_row(self, bank_id: int, external_id: str) -> int | None:
        row = self.conn.execute(
            "SELECT id FROM documents WHERE bank_id = %s AND external_id = %s",
            (bank_id, external_id),
        ).fetchone()
        return row[0] if row else None

    def ensure_document(self, bank_id: int, external_id: str, now: datetime) -> int:
        row = self.document_row(bank_id, external_id)
        if row is not None:
            return row
        return self.conn.execute(
            "INSERT INTO documents(bank_id, external_id, created_at) VALUES(%s, %s, %s) "
            "RETURNING id",
            (bank_id, external_id, iso(now)),
        ).fetchone()[0]

    def document_fact_ids(self, document_row: int) -> list[int]:
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM facts WHERE document_id = %s ORDER BY id", (document_row,)
            )
        ]

    def delete_document(self, document_row: int) -> dict[str, int]:
        counts = self.facts.delete_facts(self.document_fact_ids(document_row))
        self.conn.execute("DELETE FROM chunks WHERE document_id = %s", (document_row,))
        self.conn.execute("DELETE FROM documents WHERE id = %s", (document_row,))
        return counts

    def insert_chunk(
        self, bank_id: int, document_id: int | None, source_id: str | None, text: str
    ) -> int:
        return self.conn.execute(
            "INSERT INTO chunks(bank_id, document_id, source_id, text) VALUES(%s, %s, %s, %s) "
            "RETURNING id",
            (bank_id, document_id, source_id, text),
        ).fetchone()[0]

    def chunk_texts(self, chunk_ids: Sequence[int]) -> dict[int, str]:
        if not chunk_ids:
            return {}
        return dict(
            self.conn.execute(
                "SELECT id, text FROM chunks WHERE id = ANY(%s)", ([int(i) for i in chunk_ids],)
            ).fetchall()
        )

    def delete_empty_documents(self, bank_id: int) -> int:
        empty = [
            r[0]
            for r in self.conn.execute(
                "SELECT d.id FROM documents d WHERE d.bank_id = %s "
                "AND NOT EXISTS (SELECT 1 FROM facts f WHERE f.document_id = d.id)",
                (bank_id,),
            )
        ]
        if empty:
            self.conn.execute("DELETE FROM chunks WHERE document_id = ANY(%s)", (empty,))
            self.conn.execute("DELETE FROM documents WHERE id = ANY(%s)", (empty,))
        return len(empty)

    # -- staging ----------------------------------------------------------------------------

    def publish_staging(self, staging_bank: int, bank_id: int) -> list[str]:
        replaced: list[str] = []
        staged = self.conn.execute(
            "SELECT id, external_id FROM documents WHERE bank_id = %s ORDER BY id",
            (staging_bank,),
        ).fetchall()
        for row, external_id in staged:
            live = self.document_row(bank_id, external_id)
            if live is not None:
                old_ids = self.document_fact_ids(live)
                same = self._same_content(old_ids, row)
                self.facts.reopen_superseded(old_ids, same)
                self._carry_closed_state(old_ids, row, same)
                self.delete_document(live)
                replaced.append(external_id)
            self.conn.execute("UPDATE documents SET bank_id = %s WHERE id = %s", (bank_id, row))
        moved = [
            r[0]
            for r in self.conn.execute(
                "UPDATE facts SET bank_id = %s WHERE bank_id = %s RETURNING id",
                (bank_id, staging_bank),
            )
        ]
        self.conn.execute(
            "UPDATE chunks SET bank_id = %s WHERE bank_id = %s", (bank_id, staging_bank)
        )
        self.vectors.move_vectors(moved, bank_id)
        self.conn.execute("DELETE FROM banks WHERE id = %s", (staging_bank,))
        self.banks.release_staging_lock(staging_bank)
        return replaced

    _SAME_SAYING = (
        "n.text = o.text AND n.context IS NOT DISTINCT FROM o.context AND n.fact_type = o.fact_type"
    )

    def _same_content(self, fact_ids: Sequence[int], document_row: int) -> dict[int, int]:
        if not fact_ids:
            return {}
        return dict(
            self.conn.execute(
                "SELECT o.id, min(n.id) FROM facts o JOIN facts n ON n.document_id = %s "
                f"AND {self._SAME_SAYING} WHERE o.id = ANY(%s) GROUP BY o.id",
                (document_row, [int(i) for i in fact_ids]),
            ).fetchall()
        )

    def _carry_closed_state(
        self, fact_ids: Sequence[int], document_row: int, same: dict[int, int]
    ) -> None:
        old = [int(i) for i in fact_ids]
        if not old:
            return
        self.conn.execute(
            "UPDATE facts AS n SET invalid_at = o.invalid_at, superseded_by = o.superseded_by "
            "FROM facts o WHERE o.id = ANY(%s) "
            f"AND n.document_id = %s AND {self._SAME_SAYING} "
            "AND o.invalid_at IS NOT NULL AND n.invalid_at IS NULL "
            "AND (o.superseded_by IS NULL OR NOT o.superseded_by = ANY(%s))",
            (old, document_row, old),
        )
        if not same:
            return
        self.conn.execute(
            "UPDATE facts AS n SET invalid_at = o.invalid_at, superseded_by = m.new_id "
            "FROM facts o JOIN unnest(%s::bigint[], %s::bigint[]) AS m(old_id, new_id) "
            "ON m.old_id = o.superseded_by "
            f"WHERE o.id = ANY(%s) AND n.document_id = %s AND {self._SAME_SAYING} "
            "AND n.mentioned_at = o.mentioned_at "
            "AND o.invalid_at IS NOT NULL AND n.invalid_at IS NULL AND n.id != m.new_id",
            (list(same.keys()), list(same.values()), old, document_row),
        )

    def discard_staging(self, staging_bank: int) -> dict[str, int]:
        counts = self.facts.delete_facts(self.facts.fact_ids_of_bank(staging_bank))
        self.conn.execute("DELETE FROM chunks WHERE bank_id = %s", (staging_bank,))
        self.conn.execute("DELETE FROM documents WHERE bank_id = %s", (staging_bank,))
        self.conn.execute("DELETE FROM banks WHERE id = %s", (staging_bank,))
        self.banks.release_staging_lock(staging_bank)
        return counts

    def purge_abandoned_staging(self) -> int:
        banks = self.banks.abandoned_staging_banks()
        for staging_bank in banks:
            self.discard_staging(staging_bank)
        return len(banks)
