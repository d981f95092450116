"""Document arm: passages of consecutive facts, ranked by one vector each.

A fact is one turn or a few sentences; what a conversation is about is often said across
several turns, none of which says it all ("I started a new hobby" ... "the teacher is
great" ... "my fingers hurt from the strings": guitar lessons). The semantic arm ranks turns
one by one; this arm ranks passages: a window of a conversation's consecutive facts around
each of the best semantic hits (the facts within `document_radius` on each side, same
document or none, each said at most `document_gap_hours` after the one before), scored by
the cosine of the query to the mean of the window's vectors. Every fact of a window takes its
best window's score, so a passage about the topic lifts all its turns, and the other arms
then order them within it.

The windows are read at query time from the facts' own order and vectors (ids follow the
order retain stored them, as in recall/replies.py): no embedding at retain, no table that a
forget or a document replace could leave stale. Cost: the seeds' neighbourhoods (one range
probe each) and their vectors, most of which the semantic arm has just read.
"""

from __future__ import annotations

import numpy as np

from memcli.recall.types import ArmContext, ArmHit, ArmResult


def windows(
    seeds: list[int],
    rows: list[tuple[int, int | None, object]],
    radius: int,
    max_gap_hours: float,
) -> dict[int, list[int]]:
    """seed -> the ids of its window: the facts within `radius` places on each side in id
    order that share its document (or none) and that follow one another with gaps of at
    most max_gap_hours (a conversation, not the next day's)."""
    order = [r[0] for r in rows]
    place = {fid: i for i, fid in enumerate(order)}
    doc = {r[0]: r[1] for r in rows}
    said = {r[0]: r[2] for r in rows}
    limit = max_gap_hours * 3600.0

    def linked(a: int, b: int) -> bool:
        # a just before b: same document (or none), said in one sitting.
        if doc[a] != doc[b]:
            return False
        return 0.0 <= (said[b] - said[a]).total_seconds() <= limit

    out: dict[int, list[int]] = {}
    for seed in seeds:
        i = place.get(seed)
        if i is None:
            continue
        lo = i
        while lo > 0 and i - lo < radius and linked(order[lo - 1], order[lo]):
            lo -= 1
        hi = i
        while hi + 1 < len(order) and hi - i < radius and linked(order[hi], order[hi + 1]):
            hi += 1
        out[seed] = order[lo : hi + 1]
    return out


def run(ctx: ArmContext, semantic: ArmResult) -> ArmResult:
    s = ctx.settings
    result = ArmResult("document", [], "cosine")
    if ctx.query_vec is None or s.document_radius <= 0:
        return result
    seeds = [h.fact_id for h in semantic.hits[: s.document_seeds]]
    if not seeds:
        return result
    store = ctx.store
    rows = store.facts.fact_neighbourhoods(ctx.bank_id, seeds, s.document_radius)
    spans = windows(seeds, rows, s.document_radius, s.document_gap_hours)
    members = sorted({f for span in spans.values() for f in span})
    vectors = store.vectors.fact_vectors(ctx.bank_id, members)
    if vectors is None:
        return result
    at = {f: i for i, f in enumerate(members)}
    query = np.asarray(ctx.query_vec, dtype=np.float32)
    best: dict[int, float] = {}
    for span in spans.values():
        mean = vectors[[at[f] for f in span]].mean(axis=0)
        norm = float(np.linalg.norm(mean))
        if norm == 0.0:
            continue
        score = float(mean @ query) / norm
        for f in span:
            if score > best.get(f, -2.0):
                best[f] = score
    ranked = sorted(best, key=lambda f: (-best[f], f))
    allowed = ctx.filters.allowed(store, ranked, ctx.bank_id)
    kept = [f for f in ranked if f in allowed][: ctx.limit]
    result.hits = [ArmHit(f, best[f]) for f in kept]
    result.notes = {"seeds": len(seeds), "windows": len(spans)}
    return result
