"""What the rest of mem needs from a store, part by part: the contract a backend fulfils.

Recall, retain, the lifecycle (list, show, forget, correct, reembed), export and import, the
doctor and the benchmarks are written against StoreProtocol, never against the SQLite Store
(memcli/store/__init__.py), which satisfies it (tests/test_store_protocol.py checks every
method of every part). A second backend implements the same parts.

What is particular to SQLite stays behind these methods: reader pools (reader() is "another
connection for another thread"), data_version (change_token() is "has anyone else
committed"), cached vector scans (prepare_vector_search hands out an opaque handle that
search_with takes back), FTS5 syntax (keyword reads take search terms, fts.query_terms) and
the schema. Ids are integers a store gives; times are naive UTC datetimes, as stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from memcli.store.types import Fact

# What vectors.prepare_vector_search hands out and search_with takes back: opaque outside
# the backend that made it (SQLite: a bank's scan of its sign bits, read once per process).
VectorSearchHandle = Any


class FactFilterLike(Protocol):
    """Which facts a read may return (memcli.recall.filters.FactFilter)."""

    @property
    def types(self) -> Sequence[str] | None: ...
    @property
    def tags(self) -> Sequence[str] | None: ...
    @property
    def tags_match(self) -> str: ...  # any | all | exact
    @property
    def valid_only(self) -> bool: ...
    @property
    def as_of(self) -> datetime | None: ...


class SelectionLike(FactFilterLike, Protocol):
    """Which facts of a bank list and forget work on (memcli.lifecycle.Selection)."""

    @property
    def ids(self) -> Sequence[int] | None: ...
    @property
    def document(self) -> str | None: ...
    @property
    def source_id(self) -> str | None: ...
    @property
    def context(self) -> str | None: ...
    @property
    def since(self) -> datetime | None: ...
    @property
    def until(self) -> datetime | None: ...


class Banks(Protocol):
    """Banks: named, separate sets of memories; and the staging banks a retain call writes
    its documents into until they go live together."""

    def bank_id(self, name: str) -> int | None: ...
    def bank_exists(self, bank_id: int) -> bool: ...
    def require_bank(self, name: str) -> int:
        """The bank's id; StoreError naming the banks there are when it has none."""
        ...

    def ensure_bank(self, name: str, now: datetime) -> int: ...
    def bank_names(self) -> list[str]: ...
    def bank_stats(self) -> list[dict[str, Any]]:
        """Per user bank: facts, documents, entities, links, first and last time,
        embedder (`mem banks`, `mem stats`)."""
        ...

    def bank_created_at(self, bank_id: int) -> datetime | None: ...
    def bank_row(self, bank_id: int) -> dict[str, Any]:
        """name, created_at, embedder, embedder_fingerprint."""
        ...

    def rename_bank(self, bank_id: int, new_name: str) -> None: ...
    def delete_bank(self, bank_id: int) -> dict[str, int]:
        """Remove a bank and everything in it; counts of what went. Inside atomic()."""
        ...

    def create_staging_bank(self, bank_id: int, now: datetime) -> int:
        """A hidden bank for one retain call's documents, owned by this process."""
        ...

    def abandoned_staging_banks(self) -> list[int]:
        """Staging banks whose owning process is gone."""
        ...


class Documents(Protocol):
    """Documents, their chunks, and the atomic replacement of a document's version."""

    def document_row(self, bank_id: int, external_id: str) -> int | None: ...
    def ensure_document(self, bank_id: int, external_id: str, now: datetime) -> int: ...
    def document_fact_ids(self, document_row: int) -> list[int]: ...
    def insert_chunk(
        self, bank_id: int, document_id: int | None, source_id: str | None, text: str
    ) -> int: ...
    def chunk_texts(self, chunk_ids: Sequence[int]) -> dict[int, str]: ...
    def delete_empty_documents(self, bank_id: int) -> int:
        """Documents of the bank no fact belongs to any more, and their chunks."""
        ...

    def publish_staging(self, staging_bank: int, bank_id: int) -> list[str]:
        """Swap every document staged in staging_bank into bank_id, replacing live documents
        of the same id; the ids of those that replaced an older version. Inside atomic()."""
        ...

    def discard_staging(self, staging_bank: int) -> dict[str, int]:
        """Drop a staging bank and all it holds; counts of what went. Inside atomic()."""
        ...

    def purge_abandoned_staging(self) -> int:
        """Drop the staging banks of killed processes. Inside atomic()."""
        ...


class Facts(Protocol):
    """Facts: written, read back, selected, closed and reopened by corrections, deleted."""

    def insert_fact(
        self,
        *,
        bank_id: int,
        text: str,
        context: str | None,
        fact_type: str,
        mentioned_at: datetime,
        occurred_start: datetime | None,
        occurred_end: datetime | None,
        tags: list[str],
        metadata: dict[str, Any],
        source_id: str | None,
        document_id: int | None,
        chunk_id: int | None,
        content_hash: str,
        entity_names: list[str],
        embedding: np.ndarray,
        now: datetime,
        tail_tokens: int | None = None,
        lead_in: str | None = None,
        valid_from: datetime | None = None,
    ) -> int:
        """A new fact (its keyword index and vector too); its id, never one given before."""
        ...

    def existing_hashes(
        self, bank_id: int, document_row: int | None, hashes: Iterable[str]
    ) -> set[str]:
        """Which of `hashes` the document (None: the bank's facts of no document) holds."""
        ...

    def facts_of_sources(
        self, bank_id: int, document_row: int | None, source_ids: Sequence[str]
    ) -> list[tuple[str, str, str | None, str]]:
        """(source id, text, context, fact type) of the document's facts from these ids."""
        ...

    def delete_facts(self, fact_ids: Sequence[int]) -> dict[str, int]:
        """Remove facts everywhere they live (entities and chunks left unused go too);
        counts of what went. Inside atomic()."""
        ...

    def facts_by_id(self, fact_ids: Sequence[int], bank_id: int | None = None) -> dict[int, Fact]:
        """The facts with these ids (of one bank, when given), in id order."""
        ...

    def next_facts(self, fact_ids: Sequence[int], max_gap_hours: float) -> dict[int, int]:
        """For each fact, the next fact of its bank and document, when said at most
        max_gap_hours later."""
        ...

    def fact_neighbourhoods(
        self, bank_id: int, fact_ids: Sequence[int], radius: int
    ) -> list[tuple[int, int | None, datetime]]:
        """Every fact of the bank whose id is within radius of one of fact_ids, as (id,
        document row, said at), in id order (the document arm's windows)."""
        ...

    def contexts_among(self, bank_id: int, candidates: Sequence[str]) -> list[str]:
        """The bank's contexts equal to one of candidates, ignoring ASCII case."""
        ...

    def fact_count(self, bank_id: int | None = None) -> int:
        """Facts in one bank (None: in all user banks)."""
        ...

    def fact_ids_of_bank(self, bank_id: int) -> list[int]: ...
    def source_ids(self, bank_id: int) -> dict[int, str | None]:
        """fact id -> the caller's id of the input item it came from."""
        ...

    def fact_texts(self, bank_id: int) -> list[str]: ...
    def iter_facts(
        self, bank_id: int, sel: SelectionLike, *, limit: int | None = None, offset: int = 0
    ) -> Iterator[Fact]:
        """The selected facts of a bank, newest said first, streamed."""
        ...

    def selected_fact_ids(self, bank_id: int, sel: SelectionLike) -> list[int]: ...
    def missing_fact_ids(self, bank_id: int, ids: Sequence[int]) -> list[int]:
        """Which of ids are not facts of the bank."""
        ...

    def close_fact(self, fact_id: int, invalid_at: datetime, superseded_by: int) -> bool:
        """End a fact's validity if it is still valid; whether it was. Inside atomic()."""
        ...

    def reopen_superseded(
        self, fact_ids: Sequence[int], replacements: Mapping[int, int] | None = None
    ) -> int:
        """Facts closed by one of fact_ids become valid again (unless a fact that stays
        corrects them); how many did. Inside atomic()."""
        ...

    def superseded_among(self, fact_ids: Sequence[int]) -> int:
        """How many facts a forget of fact_ids would make valid again."""
        ...

    def facts_superseded_by(self, fact_id: int) -> list[int]: ...


class Entities(Protocol):
    """Entities (name, aliases, lookup keys) and which facts mention them."""

    def insert_entity(
        self, bank_id: int, name: str, seen: datetime, keys: Sequence[str]
    ) -> int: ...

    def add_entity_alias(self, entity_id: int, name: str, keys: Sequence[str]) -> None: ...
    def entity_candidates(
        self, bank_id: int, keys: Sequence[str], limit: int = 50
    ) -> list[tuple[int, str, list[str], datetime | None]]:
        """(id, name, aliases, last_seen) of the bank's entities sharing a lookup key."""
        ...

    def cooccurring_entities(self, entity_id: int, recent_facts: int = 200) -> set[int]: ...
    def mention_entity(self, fact_id: int, entity_id: int, seen: datetime) -> None: ...
    def entities_of_facts(self, fact_ids: Sequence[int]) -> list[tuple[int, int]]:
        """(fact id, entity id) pairs for these facts."""
        ...

    def entity_expansions(
        self, entity_ids: Sequence[int], bank_id: int, limit: int
    ) -> dict[int, tuple[int, list[int]]]:
        """entity id -> (facts of any bank carrying it, its latest facts in the bank)."""
        ...

    def fact_entity_rows(self, fact_id: int) -> list[tuple[int, str, list[str]]]:
        """(entity id, name, aliases) of the entities a fact mentions."""
        ...


class Links(Protocol):
    """Links between facts, and facts near each other in time."""

    def add_links(self, rows: Iterable[tuple[int, int, str, float]]) -> None:
        """(from, to, kind, weight); an existing link keeps the larger weight."""
        ...

    def links_from(self, seeds: Sequence[int], kind: str) -> list[tuple[int, int, float]]:
        """(seed, other end, weight) of links of one kind touching the seeds."""
        ...

    def time_neighbours(
        self, fact_id: int, limit: int, max_hours: float, floor: float
    ) -> list[tuple[int, str, float]]: ...
    def time_neighbours_of(
        self, fact_ids: Sequence[int], limit: int, max_hours: float, floor: float
    ) -> dict[int, list[tuple[int, str, float]]]:
        """fact id -> (other, kind, weight) of its nearest facts in time and its causal
        links, heaviest first, at most limit."""
        ...

    def link_count(self) -> int: ...
    def fact_links(self, fact_id: int) -> list[tuple[str, str, float, int, str]]:
        """(direction 'out'|'in', kind, weight, other fact id, other text)."""
        ...


class Vectors(Protocol):
    """Fact vectors, the embedder each bank was made with, nearest-neighbour searches."""

    def vector_dim(self) -> int | None: ...
    def has_vectors(self) -> bool: ...
    def store_embedder(self) -> str | None: ...
    def ensure_vectors(self, bank_id: int, name: str, fingerprint: str | None, dim: int) -> None:
        """Make room for vectors of dim and bind the bank to this embedder (StoreError
        when it was made with another). Inside atomic()."""
        ...

    def bank_embedder(self, bank_id: int) -> tuple[str | None, str | None]:
        """(embedder name, fingerprint) the bank was made with; (None, None) before."""
        ...

    def set_bank_embedder(self, bank_id: int, name: str, fingerprint: str | None) -> None: ...
    def has_vector(self, fact_id: int) -> bool: ...
    def bank_has_vectors(self, bank_id: int) -> bool: ...
    def vectors_for(
        self, fact_ids: Sequence[int], bank_id: int | None = None
    ) -> dict[int, np.ndarray]: ...
    def fact_vectors(self, bank_id: int, fact_ids: Sequence[int]) -> np.ndarray | None:
        """The stored vectors of these facts of the bank as a matrix in their order (a row
        of zeros for one without), or None when the bank has none to read."""
        ...

    def prepare_vector_search(
        self, bank_id: int, *, sentences: bool = False
    ) -> VectorSearchHandle | None:
        """Get ready to search the bank (a recall does it while its model loads), and its
        sentence vectors too when asked; a handle another connection of this process may
        search with (search_with), or None."""
        ...

    def search_with(self, bank_id: int, scan: VectorSearchHandle | None) -> None:
        """Search the bank with another connection's handle; None hands it back."""
        ...

    def nearest(
        self, bank_id: int, vec: np.ndarray, k: int, fact_types: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """The k facts of the bank nearest to vec as (fact id, cosine), best first."""
        ...

    def add_sentence_vectors(
        self, fact_id: int, bank_id: int, fact_type: str, vectors: np.ndarray
    ) -> None:
        """Store the vectors of the fact's sentences (retain.sentence_texts). Inside
        atomic(); deleted and moved with the fact's own vector."""
        ...

    def sentence_vectors(self, fact_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The sentence vectors of these facts, one row each in the order stored (a fact
        without any is absent)."""
        ...

    def nearest_sentences(
        self, bank_id: int, vec: np.ndarray, k: int, fact_types: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """The k facts of the bank whose nearest sentence vector is nearest to vec, as
        (fact id, that cosine), best first."""
        ...

    def nearest_among(
        self, bank_id: int, vec: np.ndarray, fact_ids: Sequence[int] | np.ndarray, k: int
    ) -> list[tuple[int, float]]: ...
    def nearest_in_window(
        self,
        bank_id: int,
        vec: np.ndarray,
        start: datetime,
        end: datetime,
        flt: FactFilterLike | None,
        k: int,
        *,
        probe: bool = True,
        said: tuple[datetime, datetime] | None = None,
    ) -> tuple[list[tuple[int, float]], dict[str, Any]]:
        """The k facts of the bank overlapping [start, end) that pass the filter, nearest
        to vec, and how they were found (for the trace)."""
        ...

    def nearest_earlier(
        self,
        bank_ids: Sequence[int],
        fact_ids: Sequence[int],
        vectors: np.ndarray,
        k: int,
        exclude: set[int],
        floor: float = -1.0,
    ) -> list[list[tuple[int, float]]]:
        """For each (fact id, vector): its k nearest facts of lower id, not excluded, with
        cosine >= floor (retain's semantic links)."""
        ...


class Search(Protocol):
    """The reads of recall's keyword and temporal arms, and fact filters."""

    def keyword_search(
        self,
        bank_id: int,
        terms: Sequence[str],
        column_weights: Sequence[float],
        flt: FactFilterLike | None,
        limit: int,
    ) -> list[tuple[int, float]]:
        """(fact id, bm25, lower is better) of the bank's best facts holding any of the
        search terms (fts.query_terms); column_weights: text, context, entities, lead-in."""
        ...

    def own_words_match(self, fact_ids: Sequence[int], terms: Sequence[str]) -> set[int]:
        """Those of these facts whose text, speaker or entities hold one of the terms."""
        ...

    def own_words_match_all(self, fact_ids: Sequence[int], terms: Sequence[str]) -> set[int]:
        """Of these facts, those whose own words hold every one of the terms."""
        ...

    def keyword_match_count(self, term: str) -> int:
        """How many facts (of any bank) hold a search term."""
        ...

    def fact_time_spans(
        self, fact_ids: Sequence[int]
    ) -> dict[int, tuple[datetime, datetime, bool]]:
        """id -> (start, end, is_period) of these facts."""
        ...

    def first_passing(
        self, ordered: Sequence[int], flt: FactFilterLike | None, bank_id: int | None, n: int
    ) -> list[int]:
        """The first n of ordered that pass the filter and belong to the bank."""
        ...

    def filter_facts(
        self, fact_ids: Sequence[int], flt: FactFilterLike | None, bank_id: int | None = None
    ) -> set[int]:
        """Those of fact_ids that pass the filter (and belong to the bank, when given)."""
        ...


class Reembed(Protocol):
    """A bank's re-embedding: new vectors staged in batches, swapped in at once."""

    def embedding_inputs(
        self, bank_id: int, after_id: int, limit: int, skip_staged: bool = False
    ) -> list[
        tuple[int, str, str | None, str | None, str | None, str, str | None, list[list[str]]]
    ]:
        """(id, text, context, occurred_start, occurred_end, lead-in, section, entity
        spellings) of the next facts by id."""
        ...

    def reembed_state(self, bank_id: int) -> dict[str, Any] | None: ...
    def begin_reembed(self, bank_id: int, state: dict[str, Any]) -> None: ...
    def staged_count(self, bank_id: int) -> int: ...
    def stage_vectors(self, bank_id: int, rows: Sequence[tuple[int, bytes]]) -> None: ...
    def other_banks_with_vectors(self, bank_id: int) -> list[str]: ...
    def swap_in_staged_vectors(
        self, bank_id: int, name: str, fingerprint: str | None, dim: int
    ) -> int:
        """Replace the bank's vectors with the staged ones. Inside atomic()."""
        ...


class Sources(Protocol):
    """Where each document came from: a file's hash, the folder a sync made it from."""

    def set_document_source(
        self, document_row: int, source_hash: str | None, sync_root: str | None
    ) -> None: ...
    def document_sources(self, bank_id: int, external_ids: Sequence[str]) -> dict[str, Any]: ...
    def synced_documents(self, bank_id: int, sync_root: str) -> dict[str, Any]: ...
    def forget_documents(self, bank_id: int, rows: Sequence[int], sync_root: str) -> int:
        """Delete these documents whole, only those a sync of sync_root still owns. Inside
        atomic()."""
        ...


class Exchange(Protocol):
    """A bank's rows as an export reads them and an import writes them back."""

    def bank_id_ranges(self, bank_id: int) -> dict[str, list[int] | None]: ...
    def export_counts(self, bank_id: int) -> dict[str, int]: ...
    def export_rows(self, bank_id: int, table: str) -> Iterator[dict[str, Any]]: ...
    def export_facts(self, bank_id: int, with_vectors: bool) -> Iterator[dict[str, Any]]: ...
    def export_links(self, bank_id: int) -> Iterator[tuple[int, int, str, float]]: ...
    def refused_writes(self) -> AbstractContextManager[None]:
        """Inside, a write the store refuses raises WriteRefused (with its own words)."""
        ...

    def defer_foreign_keys(self) -> None: ...
    def ids_taken(self, table: str, lo: int, hi: int) -> bool: ...
    def max_id(self, table: str) -> int: ...
    def keep_fact_ids_past(self, high: int) -> None: ...
    def create_bank_row(self, name: str, created_at: str) -> int: ...
    def import_document(
        self,
        bank_id: int,
        row_id: int,
        external_id: str,
        created: str,
        source_hash: str | None = None,
        sync_root: str | None = None,
    ) -> None: ...
    def import_chunk(
        self, bank_id: int, row_id: int, document: int | None, source_id: str | None, text: str
    ) -> None: ...
    def import_entity(self, bank_id: int, row_id: int, rec: dict[str, Any]) -> None: ...
    def import_fact(
        self,
        bank_id: int,
        rec: dict[str, Any],
        entity_ids: Sequence[int],
        embedding: bytes,
        tail_tokens: int | None = None,
    ) -> None: ...
    def import_links(self, rows: Sequence[tuple[int, int, str, float]]) -> None: ...
    def dangling_references(self) -> int: ...
    def correction_loops(self, bank_id: int) -> int: ...


class Health(Protocol):
    """The doctor's read-only checks."""

    def quick_check(self) -> list[str]:
        """['ok'] for a sound store, else what is wrong."""
        ...

    def foreign_key_violations(self) -> int: ...
    def fts_integrity_error(self) -> str | None:
        """What is wrong with the keyword index, or None."""
        ...

    def index_counts(self) -> dict[str, int | None]:
        """facts, fts_rows, vectors (None: no vectors yet)."""
        ...

    def index_mismatches(self, limit: int = 20) -> dict[str, list[int]]: ...
    def damaged_fact_fields(self, limit: int = 20) -> list[int]: ...
    def orphan_counts(self) -> dict[str, int]: ...
    def highest_ids(self) -> dict[str, int]: ...
    def bank_embedders(self) -> list[dict[str, Any]]: ...
    def versions(self) -> list[tuple[str, str]]:
        """(component, version) of what the store runs on, for the doctor."""
        ...

    def fact_traces(self, fact_id: int) -> dict[str, int]:
        """How many rows of each kind still mention a fact (0 everywhere after a forget)."""
        ...

    def row_counts(self) -> dict[str, int]:
        """How many rows of each kind the store holds (a census for checks and tests)."""
        ...


@runtime_checkable
class StoreProtocol(Protocol):
    """A connection to one store, as its parts."""

    @property
    def path(self) -> Path: ...
    @property
    def readonly(self) -> bool: ...
    @property
    def banks(self) -> Banks: ...
    @property
    def documents(self) -> Documents: ...
    @property
    def facts(self) -> Facts: ...
    @property
    def entities(self) -> Entities: ...
    @property
    def links(self) -> Links: ...
    @property
    def vectors(self) -> Vectors: ...
    @property
    def search(self) -> Search: ...
    @property
    def reembed(self) -> Reembed: ...
    @property
    def sources(self) -> Sources: ...
    @property
    def exchange(self) -> Exchange: ...
    @property
    def health(self) -> Health: ...

    def atomic(self) -> AbstractContextManager[object]:
        """One write transaction (nested: a savepoint): all of it commits or none."""
        ...

    def snapshot(self) -> AbstractContextManager[object]:
        """One read transaction: every read inside sees the same state."""
        ...

    def change_token(self) -> int:
        """A value that changes whenever another connection commits to the store."""
        ...

    def upgradable(self) -> bool:
        """Whether the store is at an older schema than this mem's and could be upgraded
        (a read-only connection reads it as it is)."""
        ...

    def in_transaction(self) -> bool:
        """Whether a transaction is open on this connection."""
        ...

    def reader(self) -> StoreProtocol:
        """Another connection to the same store, for reads in another thread; close it
        when done. StoreError when none can be had now (read on this one instead)."""
        ...

    def holds_alone(self) -> bool:
        """Whether this connection keeps every other one out of the store until it is
        closed (a reader on a full disk): close it as soon as its reads are done."""
        ...

    def close(self) -> None: ...
    def __enter__(self) -> StoreProtocol: ...
    def __exit__(self, *exc: object) -> None: ...
