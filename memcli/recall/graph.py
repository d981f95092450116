"""Graph arm: expand from the best semantic hits (seeds) along shared entities, semantic links
and causal links.

Reference score: tanh(0.5 x shared entities) + max semantic link weight + causal weight. Ours
weights each path by how relevant its seed is (the seed's cosine to the query) and each shared
entity by how specific it is (a speaker's name on half the facts says little; a rare place
name says a lot): entity part = tanh(0.5 x sum over shared entities of seed cosine x
specificity), specificity = ln(N / df) / ln(N) for an entity on df of the bank's N facts.
"""

from __future__ import annotations

import math
from collections import defaultdict

from memcli.recall.types import ArmContext, ArmHit, ArmResult


def specificity(df: int, total: int) -> float:
    """ln(N / df) / ln(N), in [0, 1]: 1 for an entity on one fact, 0 for one on every fact."""
    if total <= 1 or df <= 0:
        return 1.0
    return max(0.0, math.log(total / df) / math.log(total))


def run(ctx: ArmContext, semantic: ArmResult) -> ArmResult:
    s = ctx.settings
    seed_hits = [h for h in semantic.hits if h.score >= s.graph_seed_floor][: s.graph_seeds]
    seed_sim = {h.fact_id: h.score for h in seed_hits}
    seeds = list(seed_sim)
    result = ArmResult("graph", [], "graph", notes={"seeds": seeds})
    if not seeds:
        return result
    store = ctx.store
    total = store.facts.fact_count(ctx.bank_id)

    # entity -> the best cosine among the seeds carrying it, and which seeds carry it
    seeds_with: dict[int, set[int]] = defaultdict(set)
    for fact_id, entity_id in store.entities.entities_of_facts(seeds):
        seeds_with[entity_id].add(fact_id)
    # Hub entities are capped per entity so "user" or a speaker cannot flood the query.
    expansions = store.entities.entity_expansions(
        list(seeds_with), ctx.bank_id, s.graph_facts_per_entity
    )
    entity_part: dict[int, float] = defaultdict(float)
    for entity_id, carriers in seeds_with.items():
        df, latest = expansions[entity_id]
        weight = max(seed_sim[f] for f in carriers) * specificity(df, total)
        if weight <= 0:
            continue
        for fact_id in latest:
            # A seed is not reached through an entity that only it carries.
            if carriers != {fact_id}:
                entity_part[fact_id] += weight

    semantic_w: dict[int, float] = defaultdict(float)
    causal_w: dict[int, float] = defaultdict(float)
    for kind, bucket in (("semantic", semantic_w), ("causal", causal_w)):
        for seed, other, weight in store.links.links_from(seeds, kind):
            bucket[other] = max(bucket[other], weight * seed_sim[seed])

    scores: dict[int, float] = defaultdict(float)
    for fact_id, soft_count in entity_part.items():
        scores[fact_id] += math.tanh(0.5 * soft_count)
    for fact_id, weight in semantic_w.items():
        scores[fact_id] += weight
    for fact_id, weight in causal_w.items():
        scores[fact_id] += weight
    # Links and entities can reach another bank's (or a staged document's) facts.
    ranked = sorted(scores, key=lambda f: (-scores[f], -f))
    kept = ctx.filters.first_allowed(store, ranked, ctx.limit, ctx.bank_id)
    result.hits = [ArmHit(f, scores[f]) for f in kept]
    return result
