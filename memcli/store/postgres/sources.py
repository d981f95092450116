"""store.sources on PostgreSQL: where documents came from (the rules of store/sources.py;
the columns are this schema's version 2). A staged document's source moves with its row when
publish_staging swaps it live, in the same transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memcli.store.postgres.core import PgCore
from memcli.store.sources import DocumentSource

# The schema version that added documents.source_hash and sync_root (schema.py V2).
SOURCES_VERSION = 2


class PgSources:
    def __init__(self, core: PgCore, documents: Any, facts: Any) -> None:
        self.core = core
        self.conn = core.conn
        self.documents = documents
        self.facts = facts

    def _knows_sources(self) -> bool:
        """False for a store opened read-only at an older schema (a dry run does not upgrade
        it): none of its documents has a known source yet."""
        return self.core.version_at_open >= SOURCES_VERSION

    def set_document_source(
        self, document_row: int, source_hash: str | None, sync_root: str | None
    ) -> None:
        self.conn.execute(
            "UPDATE documents SET source_hash = %s, sync_root = %s WHERE id = %s",
            (source_hash, sync_root, document_row),
        )

    def document_sources(self, bank_id: int, external_ids: Sequence[str]) -> dict[str, Any]:
        """The bank's documents with these ids: external id -> DocumentSource."""
        if not external_ids:
            return {}
        columns = "source_hash, sync_root" if self._knows_sources() else "NULL, NULL"
        return {
            external_id: DocumentSource(row, external_id, source_hash, sync_root)
            for row, external_id, source_hash, sync_root in self.conn.execute(
                f"SELECT id, external_id, {columns} FROM documents "
                "WHERE bank_id = %s AND external_id = ANY(%s)",
                (bank_id, list(external_ids)),
            )
        }

    def synced_documents(self, bank_id: int, sync_root: str) -> dict[str, Any]:
        """Every document of the bank that a sync of this folder made: id -> DocumentSource."""
        if not self._knows_sources():
            return {}
        return {
            external_id: DocumentSource(row, external_id, source_hash, root)
            for row, external_id, source_hash, root in self.conn.execute(
                "SELECT id, external_id, source_hash, sync_root FROM documents "
                "WHERE bank_id = %s AND sync_root = %s",
                (bank_id, sync_root),
            )
        }

    def forget_documents(self, bank_id: int, rows: Sequence[int], sync_root: str) -> int:
        """Delete these documents of the bank whole, only those a sync of `sync_root` still
        owns (one another process replaced or forgot meanwhile is left alone). Inside
        atomic(), whose write lock makes the ownership check and the delete one step."""
        gone = 0
        for row in rows:
            owned = self.conn.execute(
                "SELECT 1 FROM documents WHERE id = %s AND bank_id = %s AND sync_root = %s",
                (int(row), bank_id, sync_root),
            ).fetchone()
            if owned is None:
                continue
            fact_ids = self.documents.document_fact_ids(row)
            # A correction the document held goes with it: what it closed is valid again.
            self.facts.reopen_superseded(fact_ids)
            self.documents.delete_document(row)
            gone += 1
        return gone
