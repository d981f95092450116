"""Cross-encoder rerank of the top fused candidates, or synthetic scores in RRF order.

Only the top `cap` candidates (by RRF) go to the cross-encoder: on a CPU an uncapped pool means
100+ second recalls. Candidates past the cap keep RRF order below every reranked one.
"""

from __future__ import annotations

from typing import Any

from memcli.recall.types import Candidate

# RecallSettings.synthetic: the base score without a reranker.
SYNTHETIC_MODES = ("fused", "linear")


def synthetic_score(rank: int, n: int, top: float = 1.0, span: float = 0.9) -> float:
    """1 - 0.9 x (rank - 1) / (n - 1) for rank 1..n: keeps RRF order on a 1.0..0.1 scale."""
    if n <= 1:
        return top
    return top - span * (rank - 1) / (n - 1)


def document_text(fact: Any) -> str:
    """What the cross-encoder reads: "[Date: June 05, 2022 (2022-06-05)] context: text"."""
    when = fact.event_time
    head = f"[Date: {when.strftime('%B %d, %Y')} ({when.strftime('%Y-%m-%d')})] "
    return head + (f"{fact.context}: " if fact.context else "") + fact.text


def fused_share(candidate: Candidate, top: float) -> float:
    """The candidate's fusion score as a share of the best one's (1.0 for the top one)."""
    return candidate.fused / top if top > 0 else 0.0


def apply(
    candidates: list[Candidate],
    query: str,
    reranker: Any | None,
    cap: int,
    synthetic: str = "linear",
) -> None:
    """Set each candidate's base score (and reranker score where one ran), in place.

    Without a reranker the base is synthetic: "linear" is the reference's
    1 - 0.9 x rank/(n-1), "fused" is each fusion score (fusion.py) as a share of the best. Over
    hundreds of candidates the linear scores of the top ten differ by a few percent, so the
    boosts (up to +-10% each) reorder them by date alone; fusion shares keep the gaps the arms
    measured."""
    if synthetic not in SYNTHETIC_MODES:
        raise ValueError(f"unknown synthetic score {synthetic!r} (use fused or linear)")
    n = len(candidates)
    if reranker is None:
        top = candidates[0].fused if candidates else 0.0
        for c in candidates:
            c.base = fused_share(c, top) if synthetic == "fused" else synthetic_score(c.rrf_rank, n)
        return
    head = candidates[:cap]
    raw = reranker.score(query, [document_text(c.fact) for c in head])
    for c, value in zip(head, raw):
        c.reranker = value  # already a probability (models/reranker.py)
        c.base = c.reranker
    tail = candidates[cap:]
    if tail:
        floor = min(c.base for c in head) if head else 1.0
        for c in tail:
            # Below every reranked candidate, still in RRF order.
            c.base = floor * 0.5 * synthetic_score(c.rrf_rank - cap, len(tail))
