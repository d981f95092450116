"""Reciprocal rank fusion: score(d) = sum over arms of 1 / (k + rank / weight), ranks from 1."""

from __future__ import annotations

from collections.abc import Mapping

from memcli.recall.types import ARMS, ArmResult, Candidate


def rrf(
    arms: Mapping[str, ArmResult], k: int = 60, weights: Mapping[str, float] | None = None
) -> list[Candidate]:
    """Fuse ranked arm lists into one list of candidates, best first (ties: lower fact id)."""
    weights = weights or {}
    fused: dict[int, Candidate] = {}
    for name, arm in arms.items():
        weight = weights.get(name, 1.0)
        for rank, hit in enumerate(arm.hits, start=1):
            cand = fused.get(hit.fact_id)
            if cand is None:
                cand = Candidate(hit.fact_id, {a: None for a in ARMS}, {})
                fused[hit.fact_id] = cand
            cand.ranks[name] = rank
            cand.arm_scores[name] = hit.score
            cand.rrf += 1.0 / (k + rank / weight)
    ordered = sorted(fused.values(), key=lambda c: (-c.rrf, c.fact_id))
    for i, cand in enumerate(ordered, start=1):
        cand.rrf_rank = i
    return ordered
