"""What the store hands out and takes in: its error, a stored fact, names and time formats."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from memcli.enums import FactType
from memcli.errors import MemError

FACT_TYPES = FactType.values()
LINK_KINDS = ("semantic", "temporal", "causal")
INT64_MAX = 2**63 - 1  # the largest INTEGER SQLite stores (ids, counts, limits)
# The largest id an import file may carry, or reach once moved past the store's own ids:
# what JSON readers (JavaScript's numbers) hold exactly. The 2^63 - 2^53 ids above it mean
# nothing a file says can use up the ids a store gives its new facts.
ID_LIMIT = 2**53 - 1

# Rows fetched per query when streaming (list, export): memory stays bounded at any size.
# Paged reads walk the primary key (`+bank_id` keeps SQLite from choosing a bank index and
# sorting the whole bank for every page).
PAGE = 500

BUSY_TIMEOUT_MAX_MS = 2**31 - 1  # SQLite takes a C int


def busy_timeout_problem(raw: str) -> str | None:
    """What is wrong with a MEM_BUSY_TIMEOUT_MS value, or None (the CLI says it)."""
    text = raw.strip()
    # ASCII digits only ("³" is a digit to str.isdigit, not to int), and few of them.
    if not (text.isascii() and text.isdigit()) or len(text) > 10 or int(text) > BUSY_TIMEOUT_MAX_MS:
        shown = raw if len(raw) <= 40 else raw[:37] + "..."
        return f"{shown!r} is not a whole number of milliseconds from 0 to {BUSY_TIMEOUT_MAX_MS}"
    return None


def _busy_timeout_ms() -> int:
    """How long a writer waits for another's lock: 30 s, or MEM_BUSY_TIMEOUT_MS (a value
    that is none: 30 s; the CLI refuses it first)."""
    import os

    raw = os.environ.get("MEM_BUSY_TIMEOUT_MS") or "30000"  # empty: not set, as every MEM_*
    return 30_000 if busy_timeout_problem(raw) else int(raw.strip())


BUSY_TIMEOUT_MS = _busy_timeout_ms()


class StoreError(MemError):
    """A problem with the database file that the user can act on (one-line message)."""


class StoreBusy(StoreError):
    """Another process held the write lock for longer than the busy timeout."""


class StoreFull(StoreError):
    """The disk (or a size limit) is full; the transaction was rolled back."""


class StoreReadOnly(StoreError):
    """The file or its folder cannot be written."""


class WriteRefused(StoreError):
    """The store refused a row an import wrote (a constraint, a value of the wrong type, a
    full disk): its text is the database's own (store.exchange.refused_writes)."""


class InterruptedAfterCommit(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP) that came while a transaction committed: Python raises it
    as the COMMIT returns, so the transaction is stored. What counts what was stored must
    count this one (store/core.py atomic)."""


def iso(dt: datetime | None) -> str | None:
    """Stored form of a time: naive UTC, to the second (aware times are converted first)."""
    if dt is None:
        return None
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt.isoformat(timespec="seconds")


def parse_iso(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


@dataclass
class Fact:
    """One stored memory, as read back for recall and output."""

    id: int
    text: str
    context: str | None
    fact_type: str
    mentioned_at: datetime
    occurred_start: datetime | None
    occurred_end: datetime | None
    tags: list[str]
    metadata: dict[str, Any]
    proof_count: int
    source_id: str | None
    document_id: str | None
    chunk_id: int | None
    entities: list[str]
    valid_from: datetime | None = None
    invalid_at: datetime | None = None
    superseded_by: int | None = None
    created_at: datetime | None = None
    # Tokens of the fact's printed block after its date (blocks.block_tail); None in a
    # store not yet upgraded, where recall counts the whole block.
    tail_tokens: int | None = None

    @property
    def event_time(self) -> datetime:
        return self.occurred_start or self.mentioned_at


def batched(items: list, size: int = 500) -> Iterator[list]:
    """Slices of at most `size`: SQLite limits the parameters of one statement."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def marks(n: int) -> str:
    return ",".join("?" * n)


def id_json(ids: Iterable[int]) -> str:
    """Distinct ids as one JSON array, for `json_each(?)`: no parameter limit, and each id
    is probed by rowid in the order given, where an IN list is first built into a temporary
    index (filter_facts of 600 candidates at 100k facts: 1.3-1.9 ms against 2.0-2.5)."""
    return json.dumps([int(i) for i in dict.fromkeys(ids)])


def content_hash(
    text: str,
    context: str | None,
    fact_type: str,
    mentioned_at: datetime | None,
    occurred_start: datetime | None = None,
    occurred_end: datetime | None = None,
) -> str:
    """Identity of a memory for dedupe: the same words (case and spacing aside) from the same
    speaker, of the same type, said at the same time about the same time. The same sentence
    said on another day is a new memory (a recurring event), not a duplicate."""
    import hashlib

    normal = " ".join(text.lower().split())
    key = "\x1f".join(
        (
            fact_type,
            (context or "").strip().lower(),
            normal,
            iso(mentioned_at) or "",
            iso(occurred_start) or "",
            iso(occurred_end) or "",
        )
    )
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def stored_json(raw: str, kind: type) -> Any:
    """A tags or metadata column as its kind; a value damaged by hand (not JSON, or of
    another kind) reads as empty, so the fact can still be listed, exported or forgotten
    (every command failed on it), and doctor names it."""
    try:
        value = json.loads(raw)
    except (ValueError, TypeError):
        return kind()
    if not isinstance(value, kind) or (kind is list and not all(isinstance(t, str) for t in value)):
        return kind()
    return value


def surviving_successor(
    by: int | None,
    forgotten: set[int],
    successor: Mapping[int, int | None],
    replacements: Mapping[int, int],
) -> int | None:
    """Where a fact closed by `by` points once `forgotten` are gone: the first fact along the
    correction chain that stays (A -> B -> C with B forgotten gives C), a forgotten fact's
    replacement (its content in a document's new version), or None: nothing corrects it any
    more. Both backends' forget reopens facts by this rule."""
    seen: set[int] = set()
    while by in forgotten and by not in seen:  # seen: a damaged, cyclic chain ends
        seen.add(by)
        if by in replacements:
            by = replacements[by]
            break
        by = successor.get(by)
    return None if by in forgotten else by
