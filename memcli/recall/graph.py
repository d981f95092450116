"""Graph arm: expand from the best semantic hits along shared entities, semantic links and
causal links. Score = tanh(0.5 x shared entities) + max semantic link weight + causal weight.
"""

from __future__ import annotations

import math
from collections import defaultdict

from memcli.recall.types import ArmContext, ArmHit, ArmResult


def run(ctx: ArmContext, semantic: ArmResult) -> ArmResult:
    s = ctx.settings
    seeds = [h.fact_id for h in semantic.hits if h.score >= s.graph_seed_floor][: s.graph_seeds]
    result = ArmResult("graph", [], "graph", notes={"seeds": seeds})
    if not seeds:
        return result
    conn = ctx.store.conn
    marks = ",".join("?" * len(seeds))

    # Shared entities: which seed entities each reached fact carries. Hub entities are capped
    # per entity so "user" or a speaker's name cannot flood the query.
    seeds_with: dict[int, set[int]] = defaultdict(set)  # entity -> seeds carrying it
    for fact_id, entity_id in conn.execute(
        f"SELECT fact_id, entity_id FROM fact_entities WHERE fact_id IN ({marks})", seeds
    ):
        seeds_with[entity_id].add(fact_id)
    shared: dict[int, set[int]] = defaultdict(set)
    for entity_id, carriers in seeds_with.items():
        for (fact_id,) in conn.execute(
            "SELECT fact_id FROM fact_entities WHERE entity_id = ? ORDER BY fact_id DESC LIMIT ?",
            (entity_id, s.graph_facts_per_entity),
        ):
            # A seed is not reached through an entity that only it carries.
            if carriers != {fact_id}:
                shared[fact_id].add(entity_id)

    semantic_w: dict[int, float] = defaultdict(float)
    causal_w: dict[int, float] = defaultdict(float)
    for kind, bucket in (("semantic", semantic_w), ("causal", causal_w)):
        for other, weight in conn.execute(
            f"SELECT to_fact, weight FROM links WHERE kind = ? AND from_fact IN ({marks}) "
            "UNION ALL SELECT from_fact, weight FROM links "
            f"WHERE kind = ? AND to_fact IN ({marks})",
            (kind, *seeds, kind, *seeds),
        ):
            bucket[other] = max(bucket[other], weight)

    scores: dict[int, float] = defaultdict(float)
    for fact_id, entities in shared.items():
        scores[fact_id] += math.tanh(0.5 * len(entities))
    for fact_id, weight in semantic_w.items():
        scores[fact_id] += weight
    for fact_id, weight in causal_w.items():
        scores[fact_id] += weight
    allowed = ctx.filters.allowed(ctx.store, list(scores))
    ranked = sorted((f for f in scores if f in allowed), key=lambda f: (-scores[f], -f))
    result.hits = [ArmHit(f, scores[f]) for f in ranked[: ctx.limit]]
    return result
