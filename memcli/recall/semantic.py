"""Semantic arm: nearest facts to the query embedding (sqlite-vec KNN, cosine)."""

from __future__ import annotations

from memcli.recall.types import ArmContext, ArmHit, ArmResult


def run(ctx: ArmContext) -> ArmResult:
    s = ctx.settings
    result = ArmResult("semantic", [], "cosine")
    if ctx.query_vec is None or not ctx.store.vectors.has_vectors():
        return result
    k = max(ctx.limit, s.semantic_min_limit)
    # vec0 cannot apply tag or validity filters inside the KNN, so fetch more and filter after.
    fetch = k * 4 if ctx.filters.tags or ctx.filters.as_of else k
    # One search over the wanted fact types together: the arm keeps the best k of them all,
    # so the best k of each type (the reference design) read up to three times the floats
    # for hits that the cut to k then drops. When the filter (facts a correction closed,
    # tags) leaves fewer than k of those found, the search goes further.
    while True:
        found = ctx.store.vectors.nearest(ctx.bank_id, ctx.query_vec, fetch, ctx.filters.types)
        scored = {fact_id: cosine for fact_id, cosine in found if cosine >= s.semantic_floor}
        allowed = ctx.filters.allowed(ctx.store, list(scored))
        ranked = sorted((f for f in scored if f in allowed), key=lambda f: -scored[f])[:k]
        if len(ranked) >= k or len(found) < fetch or len(scored) < len(found):
            break  # enough, or no more facts, or the rest are below the cosine floor
        fetch *= 4
    result.hits = [ArmHit(f, scored[f]) for f in ranked]
    return result
