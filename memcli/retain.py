"""Retain: input items -> facts (split, dated, entities, links, embedded) -> the store.

Each batch of items is one write transaction: a failure or Ctrl-C inside a batch rolls it back
whole, and batches already committed stay. Embedding (the slow part) runs before the
transaction opens, so a concurrent writer waits only for the quick inserts.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memcli import entities as entity_mod
from memcli.settings import RetainSettings
from memcli.split import split_text, starts_with_cause
from memcli.store import FACT_TYPES, Store, iso
from memcli.timeparse import TimeSpan, extract_fact_time


class RetainError(ValueError):
    """Input that cannot be stored (one-line message)."""


@dataclass
class RetainItem:
    """One piece of input: a text and what the caller knows about it."""

    text: str
    source_id: str | None = None
    timestamp: datetime | None = None
    context: str | None = None
    tags: list[str] = field(default_factory=list)
    fact_type: str | None = None
    document_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class RetainSummary:
    items: int = 0
    facts: int = 0
    duplicates: int = 0
    invalid: int = 0
    documents_replaced: int = 0
    entities: int = 0
    links: int = 0
    batches: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    stored: list[dict[str, Any]] = field(default_factory=list)

    def line(self) -> str:
        parts = [f"{self.items} items", f"{self.facts} facts stored"]
        if self.duplicates:
            parts.append(f"{self.duplicates} duplicates skipped")
        if self.invalid:
            parts.append(f"{self.invalid} invalid lines skipped")
        if self.documents_replaced:
            parts.append(f"{self.documents_replaced} documents replaced")
        parts.append(f"{self.entities} new entities")
        parts.append(f"{self.links} links")
        rate = self.facts / self.seconds if self.seconds > 0 else 0.0
        parts.append(f"{self.seconds:.1f}s ({rate:.0f} facts/s)")
        text = ", ".join(parts)
        return ("interrupted: kept " + text) if self.interrupted else text


@dataclass
class _PendingFact:
    item: RetainItem
    chunks: list[str]  # the item's raw chunks; this fact came from chunks[chunk_index]
    text: str
    chunk_index: int
    caused_by: int | None  # index into the same item's facts
    fact_type: str
    span: TimeSpan | None
    entity_names: list[str]
    content_hash: str
    embedding: np.ndarray | None = None
    lead_in: str | None = None


_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|we|we're|our|us)\b", re.I)


def guess_fact_type(text: str) -> str:
    """'experience' for first-person text (what the speaker did or felt), else 'world'."""
    return "experience" if _FIRST_PERSON.search(text) else "world"


def content_hash(text: str, context: str | None, fact_type: str) -> str:
    normal = " ".join(text.lower().split())
    key = f"{fact_type}\x1f{(context or '').strip().lower()}\x1f{normal}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def embed_text(
    text: str,
    context: str | None,
    span: TimeSpan | None,
    names: list[str],
    lead_in: str | None = None,
) -> str:
    """What the embedder sees: who said it, the text, when it happened, entity names the text
    itself does not spell out, and what was said just before (a reply like "Yes, last
    Tuesday!" means little alone). The stored text stays plain."""
    head = f"{context}: " if context else ""
    tail = ""
    if span is not None:
        tail += f" (happened {describe_span(span)})"
    lowered = text.lower()
    extra = [n for n in names if n.lower() not in lowered]
    if extra:
        tail += " [" + ", ".join(extra) + "]"
    if lead_in:
        tail += f" (in reply to: {lead_in})"
    return head + text + tail


class Retainer:
    """Stores items into one bank of a store, batch by batch."""

    def __init__(
        self,
        store: Store,
        bank: str,
        embedder: Any,
        *,
        settings: RetainSettings | None = None,
        now: datetime | None = None,
        keep_stored: bool = False,
    ) -> None:
        self.store = store
        self.bank = bank
        self.embedder = embedder
        self.settings = settings or RetainSettings()
        self.now = now or datetime.utcnow().replace(microsecond=0)
        self.keep_stored = keep_stored
        self.summary = RetainSummary()
        self._replaced_documents: set[str] = set()
        self._vectors: _VectorIndex | None = None
        self._entity_cache: dict[str, int] = {}
        # The last fact stored by this retain call: a next item that opens with "Because ..."
        # or "So ..." (a dialog reply) is causally linked to it.
        self._last_fact_id: int | None = None
        self._before: RetainItem | None = None  # the item before the current one (lead-ins)

    # -- public ---------------------------------------------------------------------------

    def retain(
        self,
        items: Iterable[RetainItem],
        progress: Callable[[int], None] | None = None,
    ) -> RetainSummary:
        """Store all items, one transaction per batch. Ctrl-C keeps committed batches."""
        started = _clock()
        try:
            for batch in _batches(items, self.settings.batch_items):
                self.retain_batch(batch)
                if progress:
                    progress(len(batch))
        except KeyboardInterrupt:
            self.summary.interrupted = True
        finally:
            self.summary.seconds = _clock() - started
        return self.summary

    def retain_batch(self, items: list[RetainItem]) -> None:
        pending = [p for item in items for p in self._prepare(item)]
        self._embed(pending)
        try:
            with self.store.write():
                bank_id = self.store.ensure_bank(self.bank, self.now)
                if pending:
                    self.store.ensure_vector_table(self.embedder.name, self.embedder.dim)
                if self._vectors is None:
                    self._vectors = _VectorIndex(*self.store.bank_vectors(bank_id))
                counts = self._insert(bank_id, items, pending)
        except BaseException:
            # Entities and vectors of a rolled-back batch do not exist: forget them.
            self._entity_cache.clear()
            self._vectors = None
            raise
        # Only now that the transaction committed do the counts become true.
        self.summary.items += len(items)
        self.summary.batches += 1
        for key, value in counts.items():
            setattr(self.summary, key, getattr(self.summary, key) + value)

    # -- steps ----------------------------------------------------------------------------

    def _prepare(self, item: RetainItem) -> list[_PendingFact]:
        if not item.text or not item.text.strip():
            raise RetainError("empty text")
        if item.fact_type is not None and item.fact_type not in FACT_TYPES:
            raise RetainError(f"unknown type {item.fact_type!r} (use {', '.join(FACT_TYPES)})")
        mentioned = item.timestamp or self.now
        chunks, facts = split_text(
            item.text, self.settings.fact_max_words, self.settings.chunk_max_words
        )
        out: list[_PendingFact] = []
        for fact in facts:
            fact_type = item.fact_type or guess_fact_type(fact.text)
            names = entity_mod.extract_entities(fact.text)
            out.append(
                _PendingFact(
                    item=item,
                    chunks=chunks,
                    text=fact.text,
                    chunk_index=fact.chunk_index,
                    caused_by=fact.caused_by,
                    fact_type=fact_type,
                    span=extract_fact_time(fact.text, mentioned),
                    entity_names=names,
                    content_hash=content_hash(fact.text, item.context, fact_type),
                )
            )
        return out

    def _lead_ins(self, pending: list[_PendingFact]) -> list[str | None]:
        """For each fact, the item said just before its item in this retain call, when the two
        are close in time (one conversation), cut to a few words."""
        s = self.settings
        out: list[str | None] = []
        current: RetainItem | None = None
        for p in pending:
            if p.item is not current:
                self._before, current = current or self._before, p.item
            prev = self._before
            lead = None
            if s.lead_in_words and prev is not None and prev.document_id == p.item.document_id:
                a, b = prev.timestamp, p.item.timestamp
                if (
                    a is None
                    and b is None
                    or (
                        a is not None
                        and b is not None
                        and abs((b - a).total_seconds()) <= s.lead_in_max_gap_hours * 3600
                    )
                ):
                    words = prev.text.split()[: s.lead_in_words]
                    lead = (f"{prev.context}: " if prev.context else "") + " ".join(words)
            out.append(lead)
        if current is not None:
            self._before = current
        return out

    def _embed(self, pending: list[_PendingFact]) -> None:
        if not pending:
            return
        for p, lead in zip(pending, self._lead_ins(pending)):
            p.lead_in = lead
        texts = [
            embed_text(p.text, p.item.context, p.span, p.entity_names, p.lead_in) for p in pending
        ]
        vectors = self.embedder.embed(texts)
        for p, v in zip(pending, vectors):
            p.embedding = v

    def _insert(
        self, bank_id: int, items: list[RetainItem], pending: list[_PendingFact]
    ) -> dict[str, int]:
        store = self.store
        counts = {"facts": 0, "duplicates": 0, "documents_replaced": 0, "entities": 0, "links": 0}
        document_rows: dict[str, int] = {}
        for item in items:
            doc = item.document_id
            if doc is None or doc in document_rows:
                continue
            if doc in self._replaced_documents:
                row = store.conn.execute(
                    "SELECT id FROM documents WHERE bank_id = ? AND external_id = ?",
                    (bank_id, doc),
                ).fetchone()
                document_rows[doc] = row[0]
            else:
                existed = store.conn.execute(
                    "SELECT 1 FROM documents WHERE bank_id = ? AND external_id = ?",
                    (bank_id, doc),
                ).fetchone()
                document_rows[doc] = store.replace_document(bank_id, doc, self.now)
                counts["documents_replaced"] += 1 if existed else 0
                self._replaced_documents.add(doc)

        existing = store.existing_hashes(bank_id, [p.content_hash for p in pending])
        chunk_rows: dict[tuple[int, int], int] = {}
        ids_by_item_fact: dict[tuple[int, int], int] = {}
        link_rows: list[tuple[int, int, str, float]] = []
        index_in_item: dict[int, int] = {}
        for p in pending:
            key = id(p.item)
            position = index_in_item.get(key, 0)
            index_in_item[key] = position + 1
            if p.content_hash in existing:
                counts["duplicates"] += 1
                continue
            existing.add(p.content_hash)
            doc_row = document_rows.get(p.item.document_id) if p.item.document_id else None
            chunk_key = (key, p.chunk_index)
            if chunk_key not in chunk_rows:
                chunk_rows[chunk_key] = store.insert_chunk(
                    bank_id, doc_row, p.item.source_id, p.chunks[p.chunk_index]
                )
            mentioned = p.item.timestamp or self.now
            fact_id = store.insert_fact(
                bank_id=bank_id,
                text=p.text,
                context=p.item.context,
                fact_type=p.fact_type,
                mentioned_at=mentioned,
                occurred_start=p.span.start if p.span else None,
                occurred_end=p.span.end if p.span else None,
                tags=p.item.tags,
                metadata=p.item.metadata,
                source_id=p.item.source_id,
                document_id=doc_row,
                chunk_id=chunk_rows[chunk_key],
                content_hash=p.content_hash,
                entity_names=p.entity_names,
                embedding=p.embedding,
                now=self.now,
                lead_in=p.lead_in,
            )
            ids_by_item_fact[(key, position)] = fact_id
            counts["entities"] += self._link_entities(bank_id, fact_id, p.entity_names, mentioned)
            if p.caused_by is not None and (key, p.caused_by) in ids_by_item_fact:
                link_rows.append((fact_id, ids_by_item_fact[(key, p.caused_by)], "causal", 1.0))
            elif position == 0 and self._last_fact_id and starts_with_cause(p.text):
                link_rows.append((fact_id, self._last_fact_id, "causal", 1.0))
            self._last_fact_id = fact_id
            link_rows.extend(self._semantic_links(fact_id, p.embedding))
            link_rows.extend(self._temporal_links(bank_id, fact_id, p.span, mentioned))
            self._vectors.add(fact_id, p.embedding)
            counts["facts"] += 1
            if self.keep_stored:
                self.summary.stored.append(
                    {
                        "id": fact_id,
                        "source_id": p.item.source_id,
                        "text": p.text,
                        "type": p.fact_type,
                        "mentioned_at": iso(mentioned),
                        "occurred_start": iso(p.span.start) if p.span else None,
                        "occurred_end": iso(p.span.end) if p.span else None,
                        "entities": p.entity_names,
                        "tags": p.item.tags,
                    }
                )
        store.add_links(link_rows)
        counts["links"] += len(link_rows)
        return counts

    # -- links and entities -----------------------------------------------------------------

    def _semantic_links(self, fact_id: int, vec: np.ndarray) -> list[tuple[int, int, str, float]]:
        """New fact -> its nearest existing facts with cosine >= the floor (weight = cosine)."""
        assert self._vectors is not None
        s = self.settings
        return [
            (fact_id, other, "semantic", round(sim, 4))
            for other, sim in self._vectors.nearest(vec, s.semantic_link_top, s.semantic_link_floor)
            if other != fact_id
        ]

    def _temporal_links(
        self, bank_id: int, fact_id: int, span: TimeSpan | None, mentioned: datetime
    ) -> list[tuple[int, int, str, float]]:
        """New fact -> up to N facts on each side in time, within a hard gap cutoff."""
        s = self.settings
        when = span.start if span else mentioned
        rows: list[tuple[int, int, str, float]] = []
        for op, order in (("<=", "DESC"), (">", "ASC")):
            for other, event_time in self.store.conn.execute(
                f"SELECT id, event_time FROM facts WHERE bank_id = ? AND id != ? "
                f"AND event_time {op} ? ORDER BY event_time {order} LIMIT ?",
                (bank_id, fact_id, iso(when), s.temporal_link_per_side),
            ):
                hours = abs((datetime.fromisoformat(event_time) - when).total_seconds()) / 3600
                if hours > s.temporal_link_max_hours:
                    break
                weight = max(s.temporal_link_floor, 1.0 - hours / 24.0)
                rows.append((fact_id, other, "temporal", round(weight, 4)))
        return rows

    def _link_entities(self, bank_id: int, fact_id: int, names: list[str], seen: datetime) -> int:
        """Resolve each name to an entity (fuzzy, see entities.py) and tie it to the fact.
        Returns how many new entities were created."""
        created = 0
        resolved: list[int] = []
        conn = self.store.conn
        for name in names:
            key = name.lower()
            entity_id = self._entity_cache.get(key)
            if entity_id is None:
                entity_id = self._resolve(bank_id, name, set(resolved), seen)
            if entity_id is None:
                conn.execute(
                    "INSERT INTO entities(bank_id, name, first_seen, last_seen, mention_count) "
                    "VALUES(?, ?, ?, ?, 0)",
                    (bank_id, name, iso(seen), iso(seen)),
                )
                entity_id = conn.last_insert_rowid()
                self._add_keys(entity_id, name)
                created += 1
            elif key not in self._entity_cache:
                self._add_alias(entity_id, name)
            self._entity_cache[key] = entity_id
            if entity_id in resolved:
                continue
            resolved.append(entity_id)
            conn.execute(
                "INSERT OR IGNORE INTO fact_entities(fact_id, entity_id) VALUES(?, ?)",
                (fact_id, entity_id),
            )
            conn.execute(
                "UPDATE entities SET mention_count = mention_count + 1, "
                "last_seen = max(coalesce(last_seen, ?), ?), "
                "first_seen = min(coalesce(first_seen, ?), ?) WHERE id = ?",
                (iso(seen), iso(seen), iso(seen), iso(seen), entity_id),
            )
        return created

    def _resolve(self, bank_id: int, name: str, context_ids: set[int], now: datetime) -> int | None:
        keys = entity_mod.candidate_keys(name)
        if not keys:
            return None
        marks = ",".join("?" * len(keys))
        conn = self.store.conn
        rows = conn.execute(
            "SELECT e.id, e.name, e.aliases, e.last_seen FROM entity_keys k "
            f"JOIN entities e ON e.id = k.entity_id WHERE k.key IN ({marks}) AND e.bank_id = ? "
            # Rows that match the whole name first, so a common token cannot push them out.
            "GROUP BY e.id ORDER BY max(k.key = ?) DESC, e.mention_count DESC LIMIT 50",
            (*keys, bank_id, keys[0]),
        ).fetchall()
        if not rows:
            return None
        # The common case, a name seen before, needs no scoring.
        lowered = name.lower()
        exact = [r[0] for r in rows if lowered in {n.lower() for n in (r[1], *json.loads(r[2]))}]
        if len(exact) == 1:
            return exact[0]
        candidates = []
        for eid, ename, aliases, last_seen in rows:
            # Co-occurrence over the entity's latest facts only: bounded for hub entities.
            co = {
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT b.entity_id FROM (SELECT fact_id FROM fact_entities "
                    "WHERE entity_id = ? ORDER BY fact_id DESC LIMIT 200) a "
                    "JOIN fact_entities b ON a.fact_id = b.fact_id WHERE b.entity_id != ?",
                    (eid, eid),
                )
            }
            candidates.append(
                entity_mod.EntityCandidate(
                    id=eid,
                    name=ename,
                    aliases=json.loads(aliases),
                    last_seen=datetime.fromisoformat(last_seen) if last_seen else None,
                    cooccurring=co,
                )
            )
        return entity_mod.resolve_entity(name, candidates, context_ids, now)

    def _add_keys(self, entity_id: int, name: str) -> None:
        self.store.conn.executemany(
            "INSERT OR IGNORE INTO entity_keys(key, entity_id) VALUES(?, ?)",
            [(k, entity_id) for k in entity_mod.candidate_keys(name)],
        )

    def _add_alias(self, entity_id: int, name: str) -> None:
        row = self.store.conn.execute(
            "SELECT name, aliases FROM entities WHERE id = ?", (entity_id,)
        ).fetchone()
        aliases = json.loads(row[1])
        if name.lower() != row[0].lower() and name.lower() not in {a.lower() for a in aliases}:
            aliases.append(name)
            self.store.conn.execute(
                "UPDATE entities SET aliases = ? WHERE id = ?",
                (json.dumps(aliases, ensure_ascii=False), entity_id),
            )
            self._add_keys(entity_id, name)


def _batches(items: Iterable[RetainItem], size: int) -> Iterator[list[RetainItem]]:
    batch: list[RetainItem] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _clock() -> float:
    return time.perf_counter()


def describe_span(span: TimeSpan) -> str:
    """A date phrase for the embedded text: "on 7 May 2023", "in May 2023", "in 2023"."""
    days = (span.end - span.start).total_seconds() / 86400
    if days <= 1.01:
        return "on " + span.start.strftime("%-d %B %Y")
    if days <= 7.01:
        return "in the week of " + span.start.strftime("%-d %B %Y")
    if days <= 31.01:
        return "in " + span.start.strftime("%B %Y")
    if days <= 366.01:
        return "in " + span.start.strftime("%Y")
    return span.start.strftime("%Y") + " to " + span.end.strftime("%Y")


class _VectorIndex:
    """The bank's unit vectors in one growable matrix, for retain-time semantic links."""

    def __init__(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        self.size = len(ids)
        dim = vecs.shape[1] if vecs.ndim == 2 and vecs.shape[1] else 0
        capacity = max(1024, 2 * self.size)
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._vecs = np.zeros((capacity, dim), dtype=np.float32)
        self._ids[: self.size] = ids
        if self.size:
            self._vecs[: self.size] = vecs

    def add(self, fact_id: int, vec: np.ndarray) -> None:
        vec = np.asarray(vec, dtype=np.float32)
        if self._vecs.shape[1] == 0:
            self._vecs = np.zeros((len(self._ids), vec.shape[0]), dtype=np.float32)
        if self.size == len(self._ids):
            self._ids = np.concatenate([self._ids, np.zeros_like(self._ids)])
            self._vecs = np.vstack([self._vecs, np.zeros_like(self._vecs)])
        self._ids[self.size] = fact_id
        self._vecs[self.size] = vec
        self.size += 1

    def nearest(self, vec: np.ndarray, top: int, floor: float) -> list[tuple[int, float]]:
        if self.size == 0:
            return []
        sims = self._vecs[: self.size] @ np.asarray(vec, dtype=np.float32)
        idx = np.argpartition(-sims, top)[:top] if self.size > top else np.arange(self.size)
        return [(int(self._ids[i]), float(sims[i])) for i in idx if sims[i] >= floor]
