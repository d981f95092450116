"""Where documents came from: the hash of the input each was made from, and the folder a
sync made it from (schema version 9).

A retain call records a staged document's source on its staging row, so the source goes
live with the document in the same transaction that publishes it (documents.py): a killed
call leaves neither, and the next run sees the old source with the old version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memcli.store.types import batched, marks

if TYPE_CHECKING:
    from memcli.store.core import StoreCore
    from memcli.store.documents import DocumentsPart
    from memcli.store.facts import FactsPart


@dataclass(frozen=True)
class DocumentSource:
    """A live document and where it came from (None: not known, e.g. JSONL input)."""

    row: int
    external_id: str
    source_hash: str | None
    sync_root: str | None


# The schema version that added documents.source_hash and sync_root (schema.py V9).
SOURCES_VERSION = 9


class SourcesPart:
    """store.sources: where each document came from (a file's hash, a synced folder)."""

    def __init__(self, core: StoreCore, documents: DocumentsPart, facts: FactsPart) -> None:
        self.core = core
        self.conn = core.conn
        self.documents = documents
        self.facts = facts

    def _knows_sources(self) -> bool:
        """False for a file opened read-only at an older schema (`--dry-run`, which does not
        upgrade it): none of its documents has a known source yet."""
        return self.core.version_at_open >= SOURCES_VERSION

    def set_document_source(
        self, document_row: int, source_hash: str | None, sync_root: str | None
    ) -> None:
        self.conn.execute(
            "UPDATE documents SET source_hash = ?, sync_root = ? WHERE id = ?",
            (source_hash, sync_root, document_row),
        )

    def document_sources(self, bank_id: int, external_ids: Sequence[str]) -> dict[str, Any]:
        """The bank's documents with these ids: external id -> DocumentSource."""
        out: dict[str, DocumentSource] = {}
        columns = "source_hash, sync_root" if self._knows_sources() else "NULL, NULL"
        for batch in batched(list(external_ids)):
            for row, external_id, source_hash, sync_root in self.conn.execute(
                f"SELECT id, external_id, {columns} FROM documents "
                f"WHERE bank_id = ? AND external_id IN ({marks(len(batch))})",
                (bank_id, *batch),
            ):
                out[external_id] = DocumentSource(row, external_id, source_hash, sync_root)
        return out

    def synced_documents(self, bank_id: int, sync_root: str) -> dict[str, Any]:
        """Every document of the bank that a sync of this folder made: id -> DocumentSource."""
        if not self._knows_sources():
            return {}
        return {
            external_id: DocumentSource(row, external_id, source_hash, root)
            for row, external_id, source_hash, root in self.conn.execute(
                "SELECT id, external_id, source_hash, sync_root FROM documents "
                "WHERE bank_id = ? AND sync_root = ?",
                (bank_id, sync_root),
            )
        }

    def forget_documents(self, bank_id: int, rows: Sequence[int], sync_root: str) -> int:
        """Delete these documents of the bank whole (facts, chunks, links, entities no other
        fact names), as `mem forget --document` does, but only those a sync of `sync_root`
        still owns: a document another process replaced or forgot meanwhile is left alone.
        Call inside atomic(). Returns the number of documents deleted."""
        gone = 0
        for row in rows:
            owned = self.conn.execute(
                "SELECT 1 FROM documents WHERE id = ? AND bank_id = ? AND sync_root = ?",
                (row, bank_id, sync_root),
            ).fetchone()
            if owned is None:
                continue
            fact_ids = self.documents.document_fact_ids(row)
            # A correction the document held goes with it: what it closed is valid again.
            self.facts.reopen_superseded(fact_ids)
            self.documents.delete_document(row)
            gone += 1
        return gone
