"""mem's store on PostgreSQL with pgvector: the same parts as the SQLite Store (banks,
documents, facts, entities, links, vectors, search, reembed, sources, exchange, health),
each with its SQL for PostgreSQL, composed on one connection (core.py). Selected by a
postgresql:// store location (open_store, memcli/store/location.py); psycopg 3 is the
optional extra `memcli[postgres]`.
"""

from __future__ import annotations

from memcli.store.postgres.banks import PgBanks
from memcli.store.postgres.core import PgCore
from memcli.store.postgres.documents import PgDocuments
from memcli.store.postgres.entities import PgEntities
from memcli.store.postgres.exchange import PgExchange
from memcli.store.postgres.facts import PgFacts
from memcli.store.postgres.health import PgHealth
from memcli.store.postgres.links import PgLinks
from memcli.store.postgres.reembed import PgReembed
from memcli.store.postgres.search import PgSearch
from memcli.store.postgres.sources import PgSources
from memcli.store.postgres.vectors import PgVectors
from memcli.store.readers import ReaderPool
from memcli.storeurl import is_postgres_url, masked


class PgStore(PgCore):
    """A connection to one mem store on PostgreSQL. Use as a context manager; write inside
    atomic()."""

    backend = "postgresql"

    def __init__(self, url: str, *, create: bool = True, readonly: bool = False) -> None:
        super().__init__(url, create=create, readonly=readonly)
        self.search = PgSearch(self)
        self.entities = PgEntities(self)
        self.links = PgLinks(self)
        self.vectors = PgVectors(self)
        self.facts = PgFacts(self, self.vectors, self.entities)
        self.reembed = PgReembed(self, self.vectors, self.facts)
        self.banks = PgBanks(self, self.facts, self.reembed)
        self.documents = PgDocuments(self, self.facts, self.vectors, self.banks)
        self.sources = PgSources(self, self.documents, self.facts)
        self.exchange = PgExchange(self, self.vectors)
        self.health = PgHealth(self, self.vectors)
        self._readers: ReaderPool[PgStore] = ReaderPool()
        self._home: ReaderPool[PgStore] | None = None

    def upgradable(self) -> bool:
        """Whether the database is at an older schema this connection could bring up to
        date (a read-only one reads it as it is)."""
        from memcli.store.postgres import schema

        return self.version_at_open != schema.SCHEMA_VERSION and self.writable()

    def holds_alone(self) -> bool:
        """(A SQLite reader on a full disk locks the file; a server connection never does.)"""
        return False

    def reader(self) -> PgStore:
        """Another connection to the same database for another thread (pooled)."""
        reader = self._readers.take()
        if reader is None:
            reader = PgStore(self.url, create=False, readonly=self.readonly)
            reader._home = self._readers
        return reader

    def close(self) -> None:
        home = self._home
        if home is not None and not self.in_transaction() and home.give_back(self):
            return
        for reader in self._readers.close():
            reader._home = None
            reader.close()
        super().close()

    def abandon(self) -> None:
        """(A file replaced under a SQLite store's connection; a server has no such case.)"""
        self.close()

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["PgStore", "is_postgres_url", "masked"]
