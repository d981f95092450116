"""The data that flows through recall: options in, arm lists, scored candidates, the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memcli.enums import TagsMatch
from memcli.settings import RecallSettings
from memcli.store import Fact
from memcli.store.protocol import StoreProtocol
from memcli.timeparse import TimeSpan

ARMS = ("semantic", "keyword", "graph", "temporal")
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

    def to_json(self, trace: bool = False) -> dict[str, Any]:
        """The JSON contract (`mem recall --format json`, the MCP recall tool)."""
        from memcli.render import to_json_obj

        return to_json_obj(self, trace)
