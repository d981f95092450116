"""Semantic arm: nearest facts to the query embedding (sqlite-vec KNN, cosine)."""

from __future__ import annotations

from memcli.recall.types import ArmContext, ArmHit, ArmResult
from memcli.store import FACT_TYPES


def run(ctx: ArmContext) -> ArmResult:
    s = ctx.settings
    result = ArmResult("semantic", [], "cosine")
    if ctx.query_vec is None or not ctx.store.has_vectors():
        return result
    k = max(ctx.limit, s.semantic_min_limit)
    # vec0 cannot apply tag or validity filters inside the KNN, so fetch more and filter after.
    fetch = k * 4 if ctx.filters.tags or ctx.filters.as_of else k
    scored: dict[int, float] = {}
    for fact_type in ctx.filters.types or FACT_TYPES:
        for fact_id, cosine in ctx.store.nearest(ctx.bank_id, ctx.query_vec, fetch, fact_type):
            if cosine >= s.semantic_floor:
                scored[fact_id] = cosine
    allowed = ctx.filters.allowed(ctx.store, list(scored))
    ranked = sorted((f for f in scored if f in allowed), key=lambda f: -scored[f])[:k]
    result.hits = [ArmHit(f, scored[f]) for f in ranked]
    return result
