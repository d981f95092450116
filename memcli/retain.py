"""Retain: input items -> facts (split, dated, entities, links, embedded) -> the store.

Three steps per batch: prepare (pure: split, dates, entities, hashes, lead-ins; then
embedding, before any lock is taken), link (nearest facts by vector and by time, causal
cues) and write (one transaction).

What a retain call promises:
- Every item is checked before the first write; a bad one fails the call with nothing
  written.
- Items of no document commit one transaction per batch: Ctrl-C keeps the committed
  batches and nothing else.
- Items with a document id form that document, across all batches of the call. Its new
  version is written into a staging bank that recall never reads, and swapped in for the
  old version in one transaction at the end: until then recall sees the old version whole,
  and an interrupted or killed call leaves it whole. With `append`, items are added to the
  existing document instead.
- Identical content (same words, speaker, type and times) is stored once per document (and
  once among the facts of no document); a sentence two documents share belongs to both.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memcli import blocks, tokens
from memcli import entities as entity_mod
from memcli.clock import utc_to_local, utcnow
from memcli.display import count, has_visible_text, one_line
from memcli.errors import MemError
from memcli.labels import label_problem
from memcli.settings import RetainSettings
from memcli.speakers import read_speakers
from memcli.split import (
    SplitFact,
    first_words,
    sentences,
    split_text,
    starts_with_cause,
    word_count,
)
from memcli.store import FACT_TYPES, InterruptedAfterCommit, StoreError, content_hash, iso
from memcli.store.protocol import StoreProtocol
from memcli.timeparse import TimeSpan, extract_fact_time, to_utc_naive


class RetainError(MemError, ValueError):
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
    # What relative dates in the text ("next Friday") are read from, when not the time it
    # was said: a correction restates an earlier statement, so it keeps that one's.
    dates_from: datetime | None = None
    # source_id is the caller's own id for this item (a JSONL "id"), not a file's name: the
    # same id with the same words is the same item, however it is dated.
    id_given: bool = False
    # One fact, its text kept as written (line breaks and all): a code block, a table, a
    # list. Not split into sentences.
    verbatim: bool = False
    # Entities the input names that the text may not spell as a name: entity name -> the
    # words that stand for it in the text (a wiki link [[Priya Sharma|Priya]]: "Priya"), or
    # None when every fact of the item is about it (the entity an observation describes).
    mentions: dict[str, str | None] = field(default_factory=dict)
    # Whether the item retained just before it (same call, same document, close in time) is
    # its lead-in, as a conversation's previous turn is a reply's. A note's paragraphs and
    # an exported list of memories are no replies to each other.
    lead_in: bool = True


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
    # Items whose speaker was read from their text ("Alice: ..."; speakers.py).
    speakers_from_text: int = 0

    def line(self) -> str:
        parts = [f"{count(self.items, 'item')}", f"{count(self.facts, 'fact')} stored"]
        if self.duplicates:
            parts.append(f"{count(self.duplicates, 'duplicate')} skipped")
        if self.invalid:
            parts.append(f"{count(self.invalid, 'invalid line')} skipped")
        if self.documents_replaced:
            parts.append(f"{count(self.documents_replaced, 'document')} replaced")
        if self.speakers_from_text:
            parts.append(f"speakers read from the text of {count(self.speakers_from_text, 'item')}")
        parts.append(f"{count(self.entities, 'new entity', 'new entities')}")
        parts.append(f"{count(self.links, 'link')}")
        rate = self.facts / self.seconds if self.seconds > 0 else 0.0
        parts.append(f"{self.seconds:.1f}s ({rate:.0f} facts/s)")
        text = ", ".join(parts)
        return ("interrupted: kept " + text) if self.interrupted else text


@dataclass
class _PendingFact:
    item: RetainItem
    chunks: list[str]  # the item's raw chunks; this fact came from chunks[chunk_index]
    text: str
    index_in_item: int
    chunk_index: int
    caused_by: int | None  # index into the same item's facts
    fact_type: str
    span: TimeSpan | None
    entity_names: list[str]
    content_hash: str
    mentioned_at: datetime
    embedding: np.ndarray | None = None
    lead_in: str | None = None
    sentence_embeddings: np.ndarray | None = None


_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|we|we're|our|us)\b", re.I)


def _undated_with_id(item: RetainItem) -> bool:
    """An item dated by the call that retains it, which the caller named with an id (a
    file's name is no such id: a journal file retained again on another day is news)."""
    return item.timestamp is None and item.id_given and bool(item.source_id)


def _timeless(text: str, context: str | None, fact_type: str) -> str:
    """A fact's identity without its times (for an undated item run again)."""
    return content_hash(text, context, fact_type, None)


def guess_fact_type(text: str) -> str:
    """'experience' for first-person text (what the speaker did or felt), else 'world'."""
    return "experience" if _FIRST_PERSON.search(text) else "world"


# -- validation ---------------------------------------------------------------------------


def check_string(value: str, what: str) -> None:
    """Raise RetainError for text SQLite and JSON cannot hold: a lone surrogate or a NUL."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = ord(value[exc.start])
        if 0xDC80 <= bad <= 0xDCFF:  # how Python keeps a byte of an argument that is no UTF-8
            raise RetainError(
                f"{what} is not valid UTF-8 (byte 0x{bad - 0xDC00:02X}, or a lone surrogate "
                f"U+{bad:04X})"
            ) from None
        raise RetainError(
            f"{what} contains an invalid character (lone surrogate U+{bad:04X})"
        ) from None
    if "\x00" in value:
        raise RetainError(f"{what} contains a NUL character")


# How deep metadata may nest: far more than any record needs, and far less than Python's
# recursion limit, which the store's JSON writer reached at ~1,000 (after 64 items of an
# import were stored).
MAX_JSON_DEPTH = 64

# The cosine at which a new fact links to an earlier one (the graph arm follows the links),
# per model (its own name); others get DEFAULT_SEMANTIC_LINK_FLOOR, the reference design's,
# set for MiniLM. e5 puts more pairs above any cosine: at 0.7 it made 12.6 links a fact on
# LoCoMo's conversations where MiniLM made 6.1, and 19 a fact at 100k (a third of the
# store's size). 0.73 gives MiniLM's density (6.6); ranked the same within a tenth of a
# point on every dev set, stores 12% smaller at 100k (bench/RESULTS.md).
DEFAULT_SEMANTIC_LINK_FLOOR = 0.7
SEMANTIC_LINK_FLOORS: dict[str, float] = {"multilingual-e5-small": 0.73}


def semantic_link_floor(model: Any, settings: RetainSettings | None = None) -> float:
    """The cosine at which facts embedded by this model link: the settings' when given,
    else the model's, else the default."""
    given = (settings or RetainSettings()).semantic_link_floor
    if given is not None:
        return given
    return SEMANTIC_LINK_FLOORS.get(getattr(model, "name", None) or "", DEFAULT_SEMANTIC_LINK_FLOOR)


def check_json_value(value: Any, what: str, depth: int = 0) -> None:
    """Raise RetainError for a value that is not plain JSON: a bad string, a non-string
    key, a number JSON cannot write (NaN, Infinity, 1e400 read as infinity), or nesting
    deeper than MAX_JSON_DEPTH."""
    if depth > MAX_JSON_DEPTH:
        raise RetainError(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep")
    if isinstance(value, str):
        check_string(value, what)
    elif isinstance(value, dict):
        for key, inner in value.items():
            check_string(str(key), f"{what} key")
            check_json_value(inner, f"{what}.{key}", depth + 1)
    elif isinstance(value, list):
        for inner in value:
            check_json_value(inner, what, depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise RetainError(f"{what} holds {value}, a number JSON cannot hold")
    elif value is not None and not isinstance(value, (bool, int, float)):
        raise RetainError(f"{what} holds a {type(value).__name__}, not JSON")


def check_item(item: RetainItem) -> RetainItem:
    """Raise RetainError for an item that cannot be stored; return it with its times as
    naive UTC (the store's form). Pure: called for every item before the first write."""
    if not isinstance(item.text, str):
        raise RetainError("text must be a string")
    check_string(item.text, "text")
    if not has_visible_text(item.text):
        raise RetainError("text is empty or only control characters")
    for name in ("source_id", "context", "document_id"):
        value = getattr(item, name)
        if value is not None:
            if not isinstance(value, str):
                raise RetainError(f"{name} must be a string")
            check_string(value, name)
    if item.context is not None:
        # A context is a one-line label (who said it): a line break in it would print as
        # the start of another memory block, dated as the name liked.
        item.context = one_line(item.context) if has_visible_text(item.context) else None
    for name in ("source_id", "document_id"):
        value = getattr(item, name)
        problem = label_problem(value) if value is not None else None
        if problem:
            raise RetainError(f"{'id' if name == 'source_id' else name} {problem}")
    if not isinstance(item.tags, list) or not all(isinstance(t, str) for t in item.tags):
        raise RetainError("tags must be a list of strings")
    for tag in item.tags:
        check_string(tag, "tag")
        problem = label_problem(tag)
        if problem:
            raise RetainError(f"a tag {problem}")
    if item.fact_type is not None and item.fact_type not in FACT_TYPES:
        raise RetainError(f"unknown type {item.fact_type!r} (use {', '.join(FACT_TYPES)})")
    if not isinstance(item.metadata, dict):
        raise RetainError("metadata must be an object")
    check_json_value(item.metadata, "metadata")
    if item.timestamp is not None:
        if not isinstance(item.timestamp, datetime):
            raise RetainError("timestamp must be a datetime")
        item.timestamp = to_utc_naive(item.timestamp)
    if item.dates_from is not None:
        if not isinstance(item.dates_from, datetime):
            raise RetainError("dates_from must be a datetime")
        item.dates_from = to_utc_naive(item.dates_from)
    if not isinstance(item.mentions, dict):
        raise RetainError("mentions must be an object")
    for name, words in item.mentions.items():
        if not isinstance(name, str) or not has_visible_text(name) or "\n" in name:
            raise RetainError(f"a mentioned entity {name!r} is not a name on one line")
        check_string(name, "a mentioned entity")
        if words is not None:
            if not isinstance(words, str):
                raise RetainError(f"the words for entity {name!r} must be a string")
            check_string(words, "a mention")
    return item


def section_of(metadata: dict[str, Any]) -> str | None:
    """The section a fact belongs to (metadata "section": the headings above a note's
    paragraph, outermost first, joined by " > "). It is embedded with the fact and indexed
    as the fact's lead-in, never part of its text."""
    section = metadata.get("section") if isinstance(metadata, dict) else None
    return section if isinstance(section, str) and has_visible_text(section) else None


# -- prepare ------------------------------------------------------------------------------


def embed_text(
    text: str,
    context: str | None,
    span: TimeSpan | None,
    names: list[str],
    lead_in: str | None = None,
    section: str | None = None,
) -> str:
    """What the embedder sees: who said it (or the note it is from) and the section it
    belongs to, the text, when it happened, entity names the text itself does not spell out,
    and what was said just before (a reply like "Yes, last Tuesday!" means little alone).
    The stored text stays plain."""
    head = " > ".join(part for part in (context, section) if part)
    head = f"{head}: " if head else ""
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


# A sentence of a fact that says several things gets a vector of its own when it has at
# least this many words (split.word_count). A turn that tells two stories is one vector near
# neither; the semantic arm scores a fact by the best of its vector and its sentences'.
# Shorter sentences ("Yes!", "Thanks, that helps.") say too little alone: with every
# sentence, LoCoMo's MRR gained nothing (bench/RESULTS.md, ninth session).
SENTENCE_VECTOR_MIN_WORDS = 10


def sentence_texts(text: str, context: str | None, section: str | None = None) -> list[str]:
    """What the embedder sees for each sentence of a fact that gets its own vector: the
    fact's sentences of at least SENTENCE_VECTOR_MIN_WORDS words, each with who said it (or
    the note and section it is from), when the fact has two sentences or more."""
    parts = sentences(text)
    if len(parts) < 2:
        return []
    return [
        embed_text(part, context, None, [], None, section)
        for part in parts
        if word_count(part) >= SENTENCE_VECTOR_MIN_WORDS
    ]


def prepare_item(item: RetainItem, now: datetime, settings: RetainSettings) -> list[_PendingFact]:
    """Split one checked item into facts with their types, times, entities and hashes."""
    mentioned = item.timestamp or now
    if item.verbatim:
        text = item.text.strip("\n")
        chunks, facts = [text], [SplitFact(text, 0)]
    else:
        chunks, facts = split_text(item.text, settings.fact_max_words, settings.chunk_max_words)
    out: list[_PendingFact] = []
    for position, fact in enumerate(facts):
        fact_type = item.fact_type or guess_fact_type(fact.text)
        # Relative words are the speaker's own calendar: "yesterday" is the day before the
        # local day it was said on (spans are day labels, not instants).
        span = extract_fact_time(fact.text, utc_to_local(item.dates_from or mentioned))
        out.append(
            _PendingFact(
                item=item,
                chunks=chunks,
                text=fact.text,
                index_in_item=position,
                chunk_index=fact.chunk_index,
                caused_by=fact.caused_by,
                fact_type=fact_type,
                span=span,
                entity_names=with_mentions(
                    entity_mod.extract_entities(fact.text), fact.text, item.mentions
                ),
                content_hash=content_hash(
                    fact.text,
                    item.context,
                    fact_type,
                    mentioned,
                    span.start if span else None,
                    span.end if span else None,
                ),
                mentioned_at=mentioned,
            )
        )
    return out


# Texts embedded between two looks at should_stop (a few seconds of CPU at most).
EMBED_CHUNK = 64


def with_mentions(names: list[str], text: str, mentions: dict[str, str | None]) -> list[str]:
    """A fact's entity names with the ones its input names: a mention whose words are in
    the fact's text (or that has no words: about every fact of the item) replaces the name
    extracted from those words ("Priya" -> "Priya Sharma") or is added."""
    if not mentions:
        return names
    out = list(names)
    for entity, words in mentions.items():
        if words is not None and not re.search(rf"(?<!\w){re.escape(words)}(?!\w)", text, re.I):
            continue
        spoken = (words or entity).lower()
        out = [n for n in out if n.lower() != spoken]
        if entity.lower() not in {n.lower() for n in out}:
            out.append(entity)
    return out


@dataclass
class _Target:
    """Where an item's facts go: a bank (real or staging) and a document row."""

    bank_id: int
    document_row: int | None


class Retainer:
    """Stores items into one bank of a store (see the module docstring for what it
    promises). One Retainer is one retain call."""

    def __init__(
        self,
        store: StoreProtocol,
        bank: str,
        embedder: Any,
        *,
        settings: RetainSettings | None = None,
        now: datetime | None = None,
        keep_stored: bool = False,
        append: bool = False,
        should_stop: Callable[[], bool] | None = None,
        document_sources: dict[str, tuple[str | None, str | None]] | None = None,
        speakers: bool = True,
    ) -> None:
        self.store = store
        # Read who said it from a transcript's "Name: text" lines (speakers.py).
        self.speakers = speakers
        # Asked before each write transaction and between embedding chunks: true when the
        # caller gave up (an MCP client's cancellation); the call then stops there.
        self.should_stop = should_stop
        self.bank = bank
        self.embedder = embedder
        self.settings = settings or RetainSettings()
        self.now = to_utc_naive(now) if now is not None else utcnow()
        self.keep_stored = keep_stored
        self.append = append
        # document id -> (source hash, sync root): recorded on the document's new version,
        # so it goes live with it (store/sources.py).
        self.document_sources = document_sources or {}
        self.summary = RetainSummary()
        # The bank this call writes into, fixed by its first batch (_bank_for_batch).
        self._bank_id: int | None = None
        self._staging_bank: int | None = None
        self._staged_docs: dict[str, int] = {}
        self._staged_items = 0  # of summary.items: staged, so gone if the call is cut short
        # Facts of live documents this call replaces: they will be gone, so nothing links
        # to them.
        self._replaced_fact_ids: set[int] = set()
        self._entity_cache: dict[str, int] = {}
        # The store's change token when those ids were last known good (_drop_stale_ids).
        self._change_token: int | None = None
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
        """Store all items. Raises RetainError (nothing written) for a bad item."""
        started = _clock()
        items = list(items)
        for number, item in enumerate(items, start=1):
            try:
                check_item(item)
            except RetainError as exc:
                where = item.source_id or (f"item {number}" if len(items) > 1 else None)
                raise RetainError(f"{where}: {exc}" if where else str(exc)) from None
        # "Alice: ..." lines of a conversation are Alice's (speakers.py says when).
        asked = len(items)  # what the caller counts: a chat log split into turns is one
        if self.speakers:
            # The turns and relabelled items are copies of checked items with a part of
            # their text: nothing to check again.
            items, self.summary.speakers_from_text = read_speakers(items)
        try:
            self._stop_if_asked()
            with self.store.atomic():
                self.store.documents.purge_abandoned_staging()
            done = reported = 0
            for batch in _batches(items, self.settings.batch_items):
                self.retain_batch(batch)
                done += len(batch)
                if progress:
                    # In the caller's items, so a progress bar sized by them ends at its end.
                    now = done * asked // len(items)
                    progress(now - reported)
                    reported = now
            self._stop_if_asked()
            self._publish()
        except KeyboardInterrupt:
            self.summary.interrupted = True
            self._discard_staging()
        except StoreError as exc:
            self._discard_staging()
            if self.summary.batches:  # say what the earlier, committed batches keep
                raise type(exc)(
                    f"{exc} (in batch {self.summary.batches + 1}; the "
                    f"{count(self.summary.items, 'item')} of the batches before it stay stored)"
                ) from exc
            raise
        except BaseException:
            self._discard_staging()
            raise
        finally:
            self.summary.seconds = _clock() - started
        return self.summary

    def _stop_if_asked(self) -> None:
        """Raise Cancelled, before the next write, when the caller has given up."""
        if self.should_stop is None or not self.should_stop():
            return
        from memcli.errors import Cancelled

        kept = self.summary.items - self._staged_items
        raise Cancelled(
            "cancelled before it was written: nothing was stored"
            if not kept
            else f"cancelled: the {count(kept, 'item')} of the batches written before stay stored"
        )

    def retain_batch(self, items: list[RetainItem]) -> None:
        pending = [p for item in items for p in prepare_item(item, self.now, self.settings)]
        self._embed(pending)
        self._stop_if_asked()
        known_bank = self._bank_id
        counts: dict[str, int] = {}
        try:
            with self.store.atomic():
                self._drop_stale_ids()
                bank_id = self._bank_for_batch()
                if pending:
                    self.store.vectors.ensure_vectors(
                        bank_id,
                        self.embedder.name,
                        getattr(self.embedder, "fingerprint", None),
                        self.embedder.dim,
                    )
                counts = self._write(bank_id, items, pending)
        except InterruptedAfterCommit:
            self._count_batch(items, counts)  # stored: the interrupted summary says so
            raise
        except BaseException:
            # Entities of a rolled-back batch do not exist: forget them (and the bank, when
            # this batch made it).
            self._entity_cache.clear()
            self._bank_id = known_bank
            raise
        self._count_batch(items, counts)

    def _count_batch(self, items: list[RetainItem], counts: dict[str, int]) -> None:
        """Only once the batch's transaction committed do its counts become true."""
        self.summary.items += len(items)
        if not self.append:
            self._staged_items += sum(1 for item in items if item.document_id is not None)
        self.summary.batches += 1
        for key, value in counts.items():
            setattr(self.summary, key, getattr(self.summary, key) + value)

    def _bank_for_batch(self) -> int:
        """The bank's id: made or found by name at the first batch, the same id after. A bank
        renamed meanwhile by another process is the same bank, written on under its new name
        (looked up by name again, later batches went to a new bank of the old name, with
        entity ids of the renamed one); a bank deleted meanwhile stops the call."""
        if self._bank_id is None:
            self._bank_id = self.store.banks.ensure_bank(self.bank, self.now)
        elif not self.store.banks.bank_exists(self._bank_id):
            raise StoreError(
                f"bank {self.bank!r} was deleted by another process while this retain ran"
            )
        return self._bank_id

    # -- staging --------------------------------------------------------------------------

    def _target(self, bank_id: int, item: RetainItem) -> _Target:
        doc = item.document_id
        if doc is None:
            return _Target(bank_id, None)
        store = self.store
        if self.append:
            return _Target(bank_id, store.documents.ensure_document(bank_id, doc, self.now))
        if self._staging_bank is None:
            self._staging_bank = store.banks.create_staging_bank(bank_id, self.now)
        row = self._staged_docs.get(doc)
        if row is None:
            row = self._staged_docs[doc] = store.documents.ensure_document(
                self._staging_bank, doc, self.now
            )
            if doc in self.document_sources:
                store.sources.set_document_source(row, *self.document_sources[doc])
            live = store.documents.document_row(bank_id, doc)
            if live is not None:
                self._replaced_fact_ids.update(store.documents.document_fact_ids(live))
        return _Target(self._staging_bank, row)

    def _publish(self) -> None:
        if self._staging_bank is None:
            return
        replaced: list[str] = []
        try:
            with self.store.atomic():
                replaced = self.store.documents.publish_staging(
                    self._staging_bank, self._bank_for_batch()
                )
        except InterruptedAfterCommit:
            # Swapped in: nothing staged is left to discard, and the summary counts it.
            self._staging_bank = None
            self.summary.documents_replaced += len(replaced)
            raise
        self._staging_bank = None
        self.summary.documents_replaced += len(replaced)

    def _discard_staging(self) -> None:
        """Drop the staged documents of a call cut short; the summary then counts only what
        stays stored (the items of no document, their entities and links)."""
        if self._staging_bank is None:
            return
        try:
            with self.store.atomic():
                dropped = self.store.documents.discard_staging(self._staging_bank)
            self.summary.items -= self._staged_items
            # Entities only the staged facts had, and their links, went with them.
            for key in ("facts", "entities", "links"):
                setattr(self.summary, key, getattr(self.summary, key) - dropped[key])
            self._staged_items = 0
        except BaseException:  # noqa: BLE001 - the next writer purges it; keep the first error
            pass
        self._staging_bank = None

    # -- prepare (lead-ins, embedding) -----------------------------------------------------

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
            if (
                s.lead_in_words
                and prev is not None
                and p.item.lead_in
                and section_of(p.item.metadata) is None
                and prev.document_id == p.item.document_id
            ):
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
                    words = first_words(prev.text, s.lead_in_words)
                    lead = (f"{prev.context}: " if prev.context else "") + words
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
            embed_text(
                p.text,
                p.item.context,
                p.span,
                p.entity_names,
                p.lead_in,
                section_of(p.item.metadata),
            )
            for p in pending
        ]
        sentence_groups = [
            sentence_texts(p.text, p.item.context, section_of(p.item.metadata)) for p in pending
        ]
        # Each distinct text once: a text repeated a thousand times (pasted twice, a log of
        # one line) was embedded a thousand times, then all but one skipped as duplicates.
        unique: dict[str, int] = {}
        slots = [unique.setdefault(text, len(unique)) for text in texts]
        sentence_slots = [
            [unique.setdefault(text, len(unique)) for text in group] for group in sentence_groups
        ]
        distinct = list(unique)
        if self.should_stop is None:
            vectors = self.embedder.embed(distinct)
        else:  # in chunks, so that a cancelled call stops within one
            parts = []
            for start in range(0, len(distinct), EMBED_CHUNK):
                self._stop_if_asked()
                parts.append(self.embedder.embed(distinct[start : start + EMBED_CHUNK]))
            vectors = np.concatenate(parts) if len(parts) > 1 else parts[0]
        for p, slot, own in zip(pending, slots, sentence_slots):
            p.embedding = vectors[slot]
            p.sentence_embeddings = vectors[own] if own else None

    # -- write ----------------------------------------------------------------------------

    def _write(
        self, bank_id: int, items: list[RetainItem], pending: list[_PendingFact]
    ) -> dict[str, int]:
        store = self.store
        counts = {"facts": 0, "duplicates": 0, "entities": 0, "links": 0}
        targets = {id(item): self._target(bank_id, item) for item in items}
        seen: dict[tuple[int, int | None], set[str]] = {}
        by_target: dict[tuple[int, int | None], list[_PendingFact]] = {}
        for p in pending:
            t = targets[id(p.item)]
            by_target.setdefault((t.bank_id, t.document_row), []).append(p)
        # Undated items with an id, stored before (the batches an interrupted run kept): the
        # same id with the same words is the same memory, whatever time this run dates it.
        rerun: set[tuple[int, int | None, str, str]] = set()
        for (target_bank, doc_row), group in by_target.items():
            seen[(target_bank, doc_row)] = store.facts.existing_hashes(
                target_bank, doc_row, [p.content_hash for p in group]
            )
            undated = {p.item.source_id for p in group if _undated_with_id(p.item)}
            for source_id, text, context, fact_type in store.facts.facts_of_sources(
                target_bank, doc_row, sorted(undated)
            ):
                rerun.add((target_bank, doc_row, source_id, _timeless(text, context, fact_type)))
        chunk_rows: dict[tuple[int, int], int] = {}
        ids_by_item_fact: dict[tuple[int, int], int] = {}
        link_rows: list[tuple[int, int, str, float]] = []
        linked: list[tuple[int, np.ndarray]] = []  # new facts, for semantic links
        for p in pending:
            key = id(p.item)
            target = targets[key]
            hashes = seen[(target.bank_id, target.document_row)]
            if p.content_hash in hashes or (
                _undated_with_id(p.item)
                and (
                    target.bank_id,
                    target.document_row,
                    p.item.source_id,
                    _timeless(p.text, p.item.context, p.fact_type),
                )
                in rerun
            ):
                counts["duplicates"] += 1
                continue
            hashes.add(p.content_hash)
            chunk_key = (key, p.chunk_index)
            if chunk_key not in chunk_rows:
                chunk_rows[chunk_key] = store.documents.insert_chunk(
                    target.bank_id, target.document_row, p.item.source_id, p.chunks[p.chunk_index]
                )
            occurred_start = p.span.start if p.span else None
            occurred_end = p.span.end if p.span else None
            fact_id = store.facts.insert_fact(
                bank_id=target.bank_id,
                text=p.text,
                context=p.item.context,
                fact_type=p.fact_type,
                mentioned_at=p.mentioned_at,
                occurred_start=occurred_start,
                occurred_end=occurred_end,
                tags=p.item.tags,
                metadata=p.item.metadata,
                source_id=p.item.source_id,
                document_id=target.document_row,
                chunk_id=chunk_rows[chunk_key],
                content_hash=p.content_hash,
                entity_names=p.entity_names,
                embedding=p.embedding,
                now=self.now,
                tail_tokens=blocks.tail_tokens(p.item.context, p.text),
                # A fact with a section has no lead-in: its section introduces it.
                lead_in=p.lead_in or section_of(p.item.metadata),
            )
            if p.sentence_embeddings is not None:
                store.vectors.add_sentence_vectors(
                    fact_id, target.bank_id, p.fact_type, p.sentence_embeddings
                )
            # Counted now, while the tokenizer is loaded, so a recall of this fact finds
            # its date's shape known (blocks.block_tokens).
            tokens.count_tokens_any_digits(
                f"[{blocks.said_and_about_times(p.mentioned_at, occurred_start, occurred_end)}]"
            )
            ids_by_item_fact[(key, p.index_in_item)] = fact_id
            counts["entities"] += self._link_entities(
                bank_id, fact_id, p.entity_names, p.mentioned_at
            )
            if p.caused_by is not None and (key, p.caused_by) in ids_by_item_fact:
                link_rows.append((fact_id, ids_by_item_fact[(key, p.caused_by)], "causal", 1.0))
            elif p.index_in_item == 0 and self._last_fact_id and starts_with_cause(p.text):
                link_rows.append((fact_id, self._last_fact_id, "causal", 1.0))
            self._last_fact_id = fact_id
            linked.append((fact_id, p.embedding))
            counts["facts"] += 1
            if self.keep_stored:
                self.summary.stored.append(
                    {
                        "id": fact_id,
                        "source_id": p.item.source_id,
                        "document_id": p.item.document_id,
                        "context": p.item.context,
                        "text": p.text,
                        "type": p.fact_type,
                        "mentioned_at": iso(p.mentioned_at),
                        "occurred_start": iso(p.span.start) if p.span else None,
                        "occurred_end": iso(p.span.end) if p.span else None,
                        "entities": p.entity_names,
                        "tags": p.item.tags,
                    }
                )
        link_rows.extend(self._semantic_links(bank_id, linked))
        store.links.add_links(link_rows)
        counts["links"] += len(link_rows)
        return counts

    # -- links and entities -----------------------------------------------------------------

    def _link_banks(self, bank_id: int) -> list[int]:
        """Where a new fact's neighbours live: the bank, and this call's staged documents."""
        return [bank_id] if self._staging_bank is None else [bank_id, self._staging_bank]

    def _semantic_links(
        self, bank_id: int, new_facts: list[tuple[int, np.ndarray]]
    ) -> list[tuple[int, int, str, float]]:
        """Each new fact -> its nearest earlier facts (the bank's, and this call's staged
        documents') with cosine >= the floor, weight = cosine. One pass per batch: the
        store reads each bank's vectors once for all of the batch's facts."""
        if not new_facts:
            return []
        s = self.settings
        ids = [fid for fid, _ in new_facts]
        vectors = np.stack([np.asarray(vec, dtype=np.float32) for _, vec in new_facts])
        nearest = self.store.vectors.nearest_earlier(
            self._link_banks(bank_id),
            ids,
            vectors,
            s.semantic_link_top,
            self._replaced_fact_ids,
            semantic_link_floor(self.embedder, s),
        )
        return [
            (fact_id, other, "semantic", round(sim, 4))
            for fact_id, found in zip(ids, nearest)
            for other, sim in found
        ]

    def _drop_stale_ids(self) -> None:
        """Forget the ids kept from earlier batches (entities, the last fact) when another
        process has committed since: a forget or a bank's deletion may have removed them,
        and the next batch failed on them with "FOREIGN KEY constraint failed". Called with
        the write lock held, so nothing changes again before the batch commits."""
        version = self.store.change_token()
        if version == self._change_token:
            return
        self._change_token = version
        self._entity_cache.clear()
        if self._last_fact_id is not None and not self.store.facts.facts_by_id(
            [self._last_fact_id]
        ):
            self._last_fact_id = None

    def _link_entities(self, bank_id: int, fact_id: int, names: list[str], seen: datetime) -> int:
        """Resolve each name to an entity of the bank (fuzzy, see entities.py) and tie it to
        the fact. Returns how many new entities were created."""
        created = 0
        resolved: list[int] = []
        store = self.store
        for name in names:
            key = name.lower()
            entity_id = self._entity_cache.get(key)
            if entity_id is None:
                entity_id = self._resolve(bank_id, name, set(resolved), seen)
            if entity_id is None:
                entity_id = store.entities.insert_entity(
                    bank_id, name, seen, entity_mod.candidate_keys(name)
                )
                created += 1
            elif key not in self._entity_cache:
                store.entities.add_entity_alias(entity_id, name, entity_mod.candidate_keys(name))
            self._entity_cache[key] = entity_id
            if entity_id in resolved:
                continue
            resolved.append(entity_id)
            store.entities.mention_entity(fact_id, entity_id, seen)
        return created

    def _resolve(self, bank_id: int, name: str, context_ids: set[int], now: datetime) -> int | None:
        rows = self.store.entities.entity_candidates(bank_id, entity_mod.candidate_keys(name))
        if not rows:
            return None
        # The common case, a name seen before, needs no scoring.
        lowered = name.lower()
        exact = [r[0] for r in rows if lowered in {n.lower() for n in (r[1], *r[2])}]
        if len(exact) == 1:
            return exact[0]
        candidates = [
            entity_mod.EntityCandidate(
                id=eid,
                name=ename,
                aliases=aliases,
                last_seen=last_seen,
                # Co-occurrence over the entity's latest facts only: bounded for hub entities.
                # It counts only against the fact's other entities: none yet, none needed.
                cooccurring=self.store.entities.cooccurring_entities(eid) if context_ids else set(),
            )
            for eid, ename, aliases, last_seen in rows
        ]
        return entity_mod.resolve_entity(name, candidates, context_ids, now)


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
