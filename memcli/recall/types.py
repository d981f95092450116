"""The data that flows through recall: options in, arm lists, scored candidates, the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memcli.enums import TagsMatch
from memcli.jsontime import calendar, instant
from memcli.settings import RecallSettings
from memcli.store import Fact
from memcli.store.protocol import StoreProtocol
from memcli.timeparse import TimeSpan

ARMS = ("semantic", "keyword", "graph", "temporal", "document")
TAG_MODES = TagsMatch.values()


@dataclass
class RecallOptions:
    budget: str = "mid"
    max_tokens: int = 4096
    limit: int | None = None
    types: list[str] | None = None
    tags: list[str] | None = None
    tags_match: str = "any"
    now: datetime | None = None
    include_chunks: bool = False
    max_chunk_tokens: int = 8192
    rerank: bool = True
    boosts: bool = True
    arms: tuple[str, ...] = ARMS
    # Drop results whose final score is below this (None: keep all that fit the budget).
    min_score: float | None = None
    # Answer as the store stood at this time: facts recorded by then and not yet closed by
    # a correction then (None: now, and closed facts are skipped).
    as_of: datetime | None = None


@dataclass
class ArmHit:
    fact_id: int
    score: float


@dataclass
class ArmResult:
    """One arm's ranked list (best first) and what it did, for fusion and the trace."""

    name: str
    hits: list[ArmHit]
    score_name: str
    seconds: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)
    # The lowest score the arm can give, when its scale has one: fusion scales its list from
    # there, not from its last hit (which min-max would count as not found).
    score_floor: float | None = None
    # The hits' facts when they were read beside the arm, on its own connection while the
    # main thread embedded the query (pipeline.py); fusion reads only the rest.
    facts: dict[int, Fact] = field(default_factory=dict)

    def ranks(self) -> dict[int, int]:
        return {h.fact_id: i for i, h in enumerate(self.hits, start=1)}


@dataclass
class ArmContext:
    """Everything an arm may read. Arms never write."""

    store: StoreProtocol
    bank_id: int
    query: str
    query_vec: np.ndarray | None
    window: TimeSpan | None
    limit: int
    filters: Any  # memcli.recall.filters.FactFilter
    settings: RecallSettings
    now: datetime
    # The window as UTC instants, for facts dated by when they were said (the window itself
    # is a span of the user's calendar, like the periods facts talk about).
    said_window: tuple[datetime, datetime] | None = None
    # The share of the query's terms that name the window (fusion.time_share).
    time_share: float = 0.0


@dataclass
class Candidate:
    """A fact on its way from fusion to output, with every score that moved it."""

    fact_id: int
    ranks: dict[str, int | None]
    arm_scores: dict[str, float]
    rrf: float = 0.0
    fused: float = 0.0  # the fusion score that orders candidates (= rrf with fusion "rrf")
    reply: float = 0.0  # share of the preceding question's fusion score, in `fused`
    rrf_rank: int = 0  # rank after fusion
    reranker: float | None = None  # real cross-encoder probability, None when not reranked
    base: float = 0.0  # reranker score, or the synthetic RRF-order score
    recency: float = 1.0
    temporal: float = 1.0
    proof: float = 1.0
    speaker: float = 1.0
    final: float = 0.0
    final_rank: int = 0
    tokens: int = 0
    fact: Fact | None = None
    # How far above the relevance floor (1.0 = on it), for the candidates the floor checked
    # (recall/floor.py); None when no floor ran.
    relevance: float | None = None


@dataclass
class RecallResult:
    query: str
    now: datetime
    budget: str
    max_tokens: int
    total_tokens: int
    reranker: str | None
    synthetic_scores: bool
    time_window: TimeSpan | None
    results: list[Candidate]  # what fits the budget, best first
    ranked: list[Candidate]  # every fused candidate in final order (before the budget)
    arms: dict[str, ArmResult]
    timings: dict[str, float]
    chunks: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    # The options the budget applied (the text output fits its header with them too).
    limit: int | None = None
    min_score: float | None = None
    # The relevance floor applied (recall/floor.py; None: none, or --min-score instead) and
    # whether any candidate passed it.
    floor: Any = None
    passed: bool | None = None

    def to_json(self, trace: bool = False) -> dict[str, Any]:
        """The JSON contract (`mem recall --format json`, the MCP recall tool)."""
        return to_json_obj(self, trace)


# -- the JSON contract of a recall (defined beside the result it describes) ----------


def candidate_json(c: Candidate) -> dict[str, Any]:
    f = c.fact
    return {
        "id": f.id,
        "source_id": f.source_id,
        "document_id": f.document_id,
        "text": f.text,
        "context": f.context,
        "type": f.fact_type,
        "tags": f.tags,
        "mentioned_at": instant(f.mentioned_at),
        "occurred_start": calendar(f.occurred_start),
        "occurred_end": calendar(f.occurred_end),
        "entities": f.entities,
        "tokens": c.tokens,
        "score": round(c.final, 6),
        "scores": {
            "rrf": round(c.rrf, 6),
            "reply": round(c.reply, 6),
            "reranker": None if c.reranker is None else round(c.reranker, 6),
            "recency": round(c.recency, 6),
            "temporal": round(c.temporal, 6),
            "proof": round(c.proof, 6),
            "speaker": round(c.speaker, 6),
        },
        "ranks": {arm: c.ranks.get(arm) for arm in ARMS},
    }


def window_json(window: Any) -> dict[str, Any] | None:
    """A query's time window as JSON: calendar times with their offsets (jsontime)."""
    if window is None:
        return None
    out = window.to_json()
    out["start"], out["end"] = calendar(window.start), calendar(window.end)
    return out


def to_json_obj(result: RecallResult, trace: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "query": result.query,
        "now": instant(result.now),
        "budget": result.budget,
        "max_tokens": result.max_tokens,
        "total_tokens": result.total_tokens,
        "reranker": result.reranker,
        "time_window": window_json(result.time_window),
        # The relevance floor (recall/floor.py), and whether any memory reached it: with
        # "passed" false the results are empty because nothing is relevant.
        "floor": (
            {**result.floor.to_json(), "passed": bool(result.passed)}
            if result.floor is not None
            else None
        ),
        "results": [candidate_json(c) for c in result.results],
    }
    if result.chunks:
        obj["chunks"] = result.chunks
    if trace:
        obj["trace"] = trace_obj(result)
    return obj


def _notes_json(notes: dict[str, Any]) -> dict[str, Any]:
    """An arm's notes for the JSON trace: a time window's bounds with their offsets."""
    window = notes.get("window")
    if not isinstance(window, dict):
        return notes
    bounds = {k: calendar(window[k]) for k in ("start", "end") if k in window}
    return {**notes, "window": {**window, **bounds}}


def trace_obj(result: RecallResult) -> dict[str, Any]:
    return {
        "scores": "reranker" if result.reranker else "synthetic (fusion score / best, no reranker)",
        "arms": {
            name: {
                "seconds": round(arm.seconds, 6),
                "score": arm.score_name,
                "hits": len(arm.hits),
                "notes": _notes_json(arm.notes),
                "top": [[h.fact_id, round(h.score, 6)] for h in arm.hits[:20]],
            }
            for name, arm in result.arms.items()
        },
        "speakers_named": result.notes.get("speakers_named", []),
        "vector_query": result.notes.get("vector_query"),
        "candidates": len(result.ranked),
        "rerank_cap": result.notes.get("rerank_cap"),
        "candidates_per_arm": result.notes.get("candidates_per_arm"),
        "timings_ms": {k: round(v * 1000, 2) for k, v in result.timings.items()},
        "settings": result.notes.get("settings"),
        "embedder": result.notes.get("embedder"),
        "fusion_weights": result.notes.get("fusion_weights"),
        "fusion_weights_reason": result.notes.get("fusion_weights_reason"),
        "ranked": [
            {
                "id": c.fact_id,
                "final_rank": c.final_rank,
                "rrf_rank": c.rrf_rank,
                "kept": c in result.results,
            }
            for c in result.ranked[:50]
        ],
    }
