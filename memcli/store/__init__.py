"""The one SQLite file and the one home of mem's SQL.

`Store` is a connection to one file; its methods (grouped by what they touch, one module
each: banks, documents, facts, entities, vectors, links, search) are the whole interface the
rest of mem uses. Opening never modifies a file that is not a mem store (base.py).
"""

from __future__ import annotations

from memcli.store.banks import BanksMixin, check_bank_name
from memcli.store.base import StoreBase, is_sqlite_file
from memcli.store.documents import DocumentsMixin
from memcli.store.entities import EntitiesMixin
from memcli.store.facts import CONTEXTS_AMONG_SQL, FactsMixin
from memcli.store.health import HealthMixin
from memcli.store.lifecycle import LifecycleMixin
from memcli.store.links import LinksMixin
from memcli.store.readers import ReaderPoolMixin
from memcli.store.schema import APPLICATION_ID, SCHEMA_VERSION
from memcli.store.search import SearchMixin
from memcli.store.types import (
    BUSY_TIMEOUT_MS,
    FACT_TYPES,
    INT64_MAX,
    LINK_KINDS,
    Fact,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreReadOnly,
    content_hash,
    iso,
    parse_iso,
)
from memcli.store.vectors import VectorsMixin


class Store(
    BanksMixin,
    DocumentsMixin,
    FactsMixin,
    EntitiesMixin,
    VectorsMixin,
    LinksMixin,
    SearchMixin,
    LifecycleMixin,
    HealthMixin,
    ReaderPoolMixin,
    StoreBase,
):
    """A connection to one mem store. Use as a context manager; write inside atomic()."""


__all__ = [
    "APPLICATION_ID",
    "BUSY_TIMEOUT_MS",
    "CONTEXTS_AMONG_SQL",
    "FACT_TYPES",
    "INT64_MAX",
    "LINK_KINDS",
    "SCHEMA_VERSION",
    "Fact",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoreFull",
    "StoreReadOnly",
    "check_bank_name",
    "content_hash",
    "is_sqlite_file",
    "iso",
    "parse_iso",
]
