"""Semantic arm: nearest facts to the query embedding (cosine), a fact by the best of its own
vector and its sentences' vectors."""

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
    # A fact scores the best cosine of its own vector and its sentences' (a fact that says
    # several things keeps a vector per longer sentence, retain.sentence_texts).
    # The sentence search looks for fewer (semantic_sentence_limit, widened as the fact
    # search is): a sentence decides a fact's place near the top of the list.
    vectors = ctx.store.vectors
    sentence_fetch = min(fetch, max(1, s.semantic_sentence_limit) * fetch // k)
    while True:
        found = vectors.nearest(ctx.bank_id, ctx.query_vec, fetch, ctx.filters.types)
        by_sentence = vectors.nearest_sentences(
            ctx.bank_id, ctx.query_vec, sentence_fetch, ctx.filters.types
        )
        scored: dict[int, float] = {}
        for fact_id, cosine in (*found, *by_sentence):
            if cosine >= s.semantic_floor and cosine > scored.get(fact_id, -2.0):
                scored[fact_id] = cosine
        allowed = ctx.filters.allowed(ctx.store, list(scored))
        ranked = sorted((f for f in scored if f in allowed), key=lambda f: -scored[f])[:k]
        # Search further while a list is full and its last hit is above the cosine floor.
        more = any(
            len(hits) >= wanted and hits[-1][1] >= s.semantic_floor
            for hits, wanted in ((found, fetch), (by_sentence, sentence_fetch))
        )
        if len(ranked) >= k or not more:
            break
        fetch *= 4
        sentence_fetch *= 4
    result.hits = [ArmHit(f, scored[f]) for f in ranked]
    return result
