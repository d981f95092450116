"""Boosts on top of the reranker score: final = base x recency x temporal x proof, where each
boost = 1 + alpha x (signal - 0.5), so a neutral signal (0.5) leaves the score unchanged."""

from __future__ import annotations

import math
from datetime import datetime

from memcli.recall.types import Candidate
from memcli.settings import RecallSettings
from memcli.store import Fact
from memcli.timeparse import TimeSpan


def boost(signal: float, alpha: float) -> float:
    return 1.0 + alpha * (signal - 0.5)


def recency_signal(fact: Fact, now: datetime, horizon_days: float = 365.0) -> float:
    """clamp(1 - days_ago / horizon, 0.1, 1). A period counts from its end, and while it is
    still running it is capped at 0.5 (it is not 'recent news' yet)."""
    if fact.occurred_start is not None:
        when = fact.occurred_end or fact.occurred_start
        running = fact.occurred_end is not None and fact.occurred_end > now >= fact.occurred_start
    else:
        when, running = fact.mentioned_at, False
    days_ago = (now - when).total_seconds() / 86400
    signal = min(max(1.0 - days_ago / horizon_days, 0.1), 1.0)
    return min(signal, 0.5) if running else signal


def temporal_signal(fact: Fact, window: TimeSpan | None) -> float:
    """1 - min(days from the window centre / half the window, 1); 0.5 when the query has no time."""
    if window is None:
        return 0.5
    start = fact.occurred_start or fact.mentioned_at
    end = fact.occurred_end or start
    mid = start + (end - start) / 2
    centre = window.start + (window.end - window.start) / 2
    half_days = max((window.end - window.start).total_seconds() / 86400 / 2, 1e-9)
    days = abs((mid - centre).total_seconds()) / 86400
    return 1.0 - min(days / half_days, 1.0)


def proof_signal(fact: Fact) -> float:
    """clamp(0.5 + ln(proof_count) / 10, 0, 1) for observations; 0.5 for everything else."""
    if fact.fact_type != "observation":
        return 0.5
    return min(max(0.5 + math.log(max(fact.proof_count, 1)) / 10, 0.0), 1.0)


def apply(
    candidates: list[Candidate],
    now: datetime,
    window: TimeSpan | None,
    settings: RecallSettings,
    enabled: bool = True,
) -> list[Candidate]:
    """Compute boosts and final scores, and return the candidates in final order."""
    for c in candidates:
        fact = c.fact
        assert fact is not None
        if enabled:
            c.recency = boost(
                recency_signal(fact, now, settings.recency_horizon_days), settings.recency_alpha
            )
            c.temporal = boost(temporal_signal(fact, window), settings.temporal_alpha)
            c.proof = boost(proof_signal(fact), settings.proof_alpha)
        else:
            c.recency = c.temporal = c.proof = 1.0
        c.final = c.base * c.recency * c.temporal * c.proof
    ordered = sorted(candidates, key=lambda c: (-c.final, c.rrf_rank))
    for i, c in enumerate(ordered, start=1):
        c.final_rank = i
    return ordered
