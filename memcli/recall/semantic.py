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
    # vec0 cannot apply tag filters inside the KNN, so fetch more and filter after.
    fetch = k * 4 if ctx.filters.tags else k
    blob = ctx.query_vec.astype("float32").tobytes()
    scored: dict[int, float] = {}
    for fact_type in ctx.filters.types or FACT_TYPES:
        for fact_id, distance in ctx.store.conn.execute(
            "SELECT fact_id, distance FROM fact_vec WHERE embedding MATCH ? AND k = ? "
            "AND bank_id = ? AND fact_type = ?",
            (blob, fetch, ctx.bank_id, fact_type),
        ):
            cosine = 1.0 - distance
            if cosine >= s.semantic_floor:
                scored[fact_id] = cosine
    allowed = ctx.filters.allowed(ctx.store, list(scored))
    ranked = sorted((f for f in scored if f in allowed), key=lambda f: -scored[f])[:k]
    result.hits = [ArmHit(f, scored[f]) for f in ranked]
    return result
