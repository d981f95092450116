"""What `Memory` returns: typed results whose fields are the JSON contract.

Each result's `to_json()` is exactly what `--format json` prints and what an MCP tool
answers. The fields hold times in the store's form (naive: UTC instants, calendar periods);
`to_json()` writes each with an explicit offset (memcli/jsontime.py). A recall returns
memcli.recall.RecallResult, whose `to_json()` is memcli/render.py's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any


def _iso(value: datetime | None) -> str | None:
    from memcli.store import iso

    return iso(value)


# The fields of a fact that are instants (UTC) and calendar times (the speaker's days).
INSTANT_FIELDS = ("mentioned_at", "valid_from", "invalid_at", "created_at")
CALENDAR_FIELDS = ("occurred_start", "occurred_end")


def with_offsets(fields: dict[str, Any]) -> dict[str, Any]:
    """A fact's JSON fields with each time written with its offset (jsontime)."""
    from memcli.jsontime import calendar, instant

    out = dict(fields)
    for key in INSTANT_FIELDS:
        if key in out:
            out[key] = instant(out[key])
    for key in CALENDAR_FIELDS:
        if key in out:
            out[key] = calendar(out[key])
    return out


def bank_row_json(row: dict[str, Any]) -> dict[str, Any]:
    """A bank's row (store.bank_stats) as JSON: first and last with their offsets, without
    the flags that say which of them is a period (machine output never carried them)."""
    from memcli.jsontime import event

    out = {k: v for k, v in row.items() if not k.endswith("_is_period")}
    for end in ("first", "last"):
        if end in out:
            out[end] = event(row[end], bool(row.get(f"{end}_is_period")))
    return out


class _Result:
    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


# -- retain ---------------------------------------------------------------------------------


@dataclass
class StoredFact(_Result):
    """One fact a retain stored."""

    id: int
    source_id: str | None
    document_id: str | None
    context: str | None
    text: str
    type: str
    mentioned_at: str
    occurred_start: str | None
    occurred_end: str | None
    entities: list[str]
    tags: list[str]
    # Older, still valid facts of the same speaker that this one nearly repeats, most similar
    # first: a hint that it may correct them (`correct` acts on it; nothing was changed).
    possibly_supersedes: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return with_offsets(asdict(self))


@dataclass
class RetainSummary(_Result):
    items: int
    facts: int
    duplicates: int
    invalid: int
    documents_replaced: int
    entities: int
    links: int
    batches: int
    seconds: float
    interrupted: bool
    # Items whose speaker was read from their text ("Alice: ..."; memcli/speakers.py).
    speakers_from_text: int = 0


@dataclass
class RetainResult:
    stored: list[StoredFact]
    summary: RetainSummary
    # Not part of the JSON: a note for a person (mostly-CJK text into an English-only bank).
    warning: str | None = None
    line_text: str = ""
    # Files left out as retained before from the same bytes (retain --file).
    unchanged: list[str] = field(default_factory=list)

    @classmethod
    def nothing(cls, unchanged: list[str]) -> RetainResult:
        """A retain that had nothing new: every file was as it was retained."""
        counts = RetainSummary(0, 0, 0, 0, 0, 0, 0, 0, 0.0, False)
        return cls([], counts, None, "0 items, 0 facts stored", list(unchanged))

    @classmethod
    def of(cls, summary: Any, warning: str | None = None) -> RetainResult:
        counts = RetainSummary(
            **{k: getattr(summary, k) for k in RetainSummary.__dataclass_fields__}
        )
        stored = [StoredFact(**s) for s in summary.stored]
        return cls(stored, counts, warning, summary.line())

    @property
    def interrupted(self) -> bool:
        return self.summary.interrupted

    def line(self) -> str:
        """One line saying what was stored (the CLI prints it on stderr)."""
        return self.line_text

    def to_json(self) -> dict[str, Any]:
        return {"stored": [s.to_json() for s in self.stored], "summary": self.summary.to_json()}


# -- list, show -----------------------------------------------------------------------------


@dataclass
class FactRecord(_Result):
    """A fact as `list` gives it."""

    id: int
    text: str
    context: str | None
    type: str
    mentioned_at: str
    occurred_start: str | None
    occurred_end: str | None
    valid_from: str | None
    invalid_at: str | None
    superseded_by: int | None
    created_at: str | None
    tags: list[str]
    metadata: dict[str, Any]
    source_id: str | None
    document_id: str | None
    chunk_id: int | None
    entities: list[str]

    @classmethod
    def of(cls, f: Any) -> FactRecord:
        from memcli.lifecycle import fact_json

        record = cls(**fact_json(f))
        # The stored fact itself, for renderers that show its times in local time (not
        # part of the JSON).
        record.fact = f
        return record

    fact: Any = field(default=None, init=False, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["fact"]
        return with_offsets(out)


@dataclass
class FactDetail(_Result):
    """A fact whole, as `show` gives it: a FactRecord's fields with its entities as
    objects, its chunk, links, correction history and the bank's embedder."""

    id: int
    text: str
    context: str | None
    type: str
    mentioned_at: str
    occurred_start: str | None
    occurred_end: str | None
    valid_from: str | None
    invalid_at: str | None
    superseded_by: int | None
    created_at: str | None
    tags: list[str]
    metadata: dict[str, Any]
    source_id: str | None
    document_id: str | None
    chunk_id: int | None
    entities: list[dict[str, Any]]
    chunk: str | None
    links: list[dict[str, Any]]
    history: list[dict[str, Any]]
    embedder: str | None
    embedder_fingerprint: str | None
    has_vector: bool

    def to_json(self) -> dict[str, Any]:
        out = with_offsets(asdict(self))
        out["history"] = [with_offsets(h) for h in self.history]
        return out


# -- forget, correct ------------------------------------------------------------------------


@dataclass
class ForgetResult:
    """A forget: with dry_run, what would go; else what went. `preview`: the first facts
    of the selection (shown before a question)."""

    dry_run: bool
    fact_ids: list[int]
    reopens: int
    counts: dict[str, int] | None
    preview: list[FactRecord]
    # A guarded forget's preview (Memory.forget_guarded): what a second call must echo as
    # `confirm` to remove these facts (None: nothing needs confirming).
    token: str | None = None

    @classmethod
    def of(
        cls, plan: Any, dry_run: bool, counts: dict[str, int] | None, token: str | None = None
    ) -> ForgetResult:
        preview = [FactRecord.of(f) for f in plan.preview]
        return cls(dry_run, list(plan.fact_ids), plan.reopens, counts, preview, token)

    def to_json(self) -> dict[str, Any]:
        from memcli.lifecycle import FORGET_COUNTS

        if self.dry_run:
            out = {
                "dry_run": True,
                "would_forget": self.fact_ids,
                "would_reopen": self.reopens,
                "facts": [f.to_json() for f in self.preview],
            }
            if self.token is not None:
                out["count"] = len(self.fact_ids)
                out["confirm"] = self.token
            return out
        return {
            "forgotten": self.fact_ids,
            "counts": self.counts or dict.fromkeys(FORGET_COUNTS, 0),
        }


@dataclass
class CorrectResult(_Result):
    corrected: int
    by: list[int]
    at: str

    @classmethod
    def of(cls, fact_id: int, new_ids: list[int], at: datetime) -> CorrectResult:
        return cls(fact_id, list(new_ids), _iso(at) or "")

    def to_json(self) -> dict[str, Any]:
        from memcli.jsontime import instant

        return {"corrected": self.corrected, "by": self.by, "at": instant(self.at)}


# -- banks, stats ---------------------------------------------------------------------------


@dataclass
class BankInfo(_Result):
    bank: str
    facts: int
    documents: int
    entities: int
    links: int
    first: str | None
    last: str | None
    embedder: str | None
    embedder_fingerprint: str | None
    first_is_period: bool
    last_is_period: bool
    reembedding: str | None = None

    def to_json(self) -> dict[str, Any]:
        return bank_row_json(asdict(self))


@dataclass
class Stats(_Result):
    db: str
    embedder: str | None
    banks: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {
            "db": self.db,
            "embedder": self.embedder,
            "banks": [bank_row_json(row) for row in self.banks],
        }


# -- import, re-embed -----------------------------------------------------------------------


@dataclass
class ImportResult:
    bank: str
    counts: dict[str, int]
    renumbered: list[str]
    embedded: int
    seconds: float

    @classmethod
    def of(cls, report: Any) -> ImportResult:
        return cls(report.bank, report.counts, report.renumbered, report.embedded, report.seconds)

    def to_json(self) -> dict[str, Any]:
        return {
            "bank": self.bank,
            "counts": self.counts,
            "renumbered": self.renumbered,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class ReembedResult(_Result):
    bank: str
    embedder: str
    fingerprint: str | None
    facts: int
    embedded: int
    resumed: int
    seconds: float
    interrupted: bool = False
