"""Temporal arm (only when the query names a time): facts dated inside the window that are
about the query, spread along temporal and causal links to what happened around them.

Ranked by its own temporal score (the reference system sorted by a missing field, so its ranks
were insertion order).

A fact's temporal neighbours are read at query time from the time index (store/links.py), by
the rule retain used to store them with (RetainSettings: at most a week apart, weight
max(0.3, 1 - hours / 24)); causal links are stored.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from memcli.clock import utc_to_local
from memcli.recall.types import ArmContext, ArmHit, ArmResult
from memcli.settings import RetainSettings
from memcli.timeparse import TimeSpan

CAUSAL_BOOST = 2.0
# How far outside an open window ("since May", "before 2020") a fact's fit falls to 0.
OPEN_WINDOW_FALLOFF = timedelta(days=60)
TEMPORAL_BOOST = 1.0
_LINK_RULE = RetainSettings()


def proximity(start: datetime, end: datetime, window: TimeSpan) -> float:
    """How well a fact's time fits the window: 1 at its centre, 0.5 at its edges (inside is
    already a match), falling to 0 at half a window's width outside. An open window ("since
    May") has no centre: 1 anywhere inside, falling to 0 OPEN_WINDOW_FALLOFF outside (half
    of its width would be decades for "before 2020")."""
    if window.open_ended:
        # Half-open as the window (and temporal_signal, and the store): a period ends
        # before its end, a bare time is a point.
        if start < window.end and (end > window.start or start >= window.start):
            return 1.0
        overshoot = (
            (window.start - end).total_seconds()
            if end <= window.start
            else (start - window.end).total_seconds()
        )
        return max(0.0, 0.5 * (1.0 - overshoot / OPEN_WINDOW_FALLOFF.total_seconds()))
    half = max((window.end - window.start).total_seconds() / 2, 1.0)
    centre = window.start + (window.end - window.start) / 2
    mid = start + (end - start) / 2
    if end >= window.start and start <= window.end:
        distance = abs((mid - centre).total_seconds())
        return max(0.5, 1.0 - 0.5 * min(distance / half, 1.0))
    overshoot = (
        (window.start - end).total_seconds()
        if end < window.start
        else (start - window.end).total_seconds()
    )
    return max(0.0, 0.5 * (1.0 - overshoot / half))


def calendar_spans(
    spans: dict[int, tuple[datetime, datetime, bool]],
) -> dict[int, tuple[datetime, datetime]]:
    """Facts' times on the user's calendar, as query windows are: a period as stored, the
    instant a fact was said (UTC) as local time."""
    out: dict[int, tuple[datetime, datetime]] = {}
    for fid, (start, end, is_period) in spans.items():
        if is_period:
            out[fid] = (start, end)
        else:
            local = utc_to_local(start)
            out[fid] = (local, local)
    return out


def run(ctx: ArmContext) -> ArmResult:
    s = ctx.settings
    window = ctx.window
    # Scores are half window fit, half cosine, both in [0, 1]: a list of two in-window facts
    # ("what did I do yesterday?") keeps both, where min-max would zero the second.
    result = ArmResult("temporal", [], "temporal", score_floor=0.0)
    if window is None or ctx.query_vec is None:
        return result
    nearest, found = ctx.store.vectors.nearest_in_window(
        ctx.bank_id,
        ctx.query_vec,
        window.start,
        window.end,
        ctx.filters,
        s.temporal_pool,
        said=ctx.said_window,
    )
    cosine = dict(nearest)
    # The cosine floor keeps off-topic facts of the window out; a query that is all time
    # words ("what happened last year?") has no topic to be off, so the floor falls with the
    # time words' share t, to -1 (every fact of the window) at t = 1.
    floor = s.temporal_pool_floor - ctx.time_share * (1.0 + s.temporal_pool_floor)
    pool = [f for f, c in nearest if c >= floor]
    times = calendar_spans(ctx.store.search.fact_time_spans(pool))
    pool = [f for f in pool if f in times]  # a fact deleted meanwhile by another process
    # Score in the pool: half how well it fits the window, half how well it fits the query.
    score = {f: 0.5 * proximity(*times[f], window) + 0.5 * cosine[f] for f in pool}

    entries = _entry_points(pool, times, score, window, s.temporal_entry_points, s.temporal_buckets)
    result.notes = {
        "window": window.to_json(),
        # {"listed": n}: the window's n facts were listed; {"probed": r, "in_window": n}: of
        # the r rows nearest by sign bits, n were in it (store/vectors.py).
        "window_facts": found,
        "pool": len(pool),
        "entry_points": entries,
    }
    _spread(ctx, entries, score, window)
    ranked = sorted(score, key=lambda f: (-score[f], f))
    kept = ctx.filters.first_allowed(ctx.store, ranked, ctx.limit, ctx.bank_id)
    result.hits = [ArmHit(f, round(score[f], 6)) for f in kept]
    return result


def _entry_points(
    pool: list[int],
    times: dict[int, tuple[datetime, datetime]],
    score: dict[int, float],
    window: TimeSpan,
    count: int,
    buckets: int,
) -> list[int]:
    """Pick entry points round-robin across equal time buckets of the window, best first in
    each, so a long window is covered and not just its densest stretch."""
    width = (window.end - window.start) / buckets
    by_bucket: list[list[int]] = [[] for _ in range(buckets)]
    for f in sorted(pool, key=lambda f: -score[f]):
        offset = times[f][0] - window.start
        index = int(offset / width) if width.total_seconds() > 0 else 0
        by_bucket[min(max(index, 0), buckets - 1)].append(f)
    entries: list[int] = []
    while len(entries) < count and any(by_bucket):
        for bucket in by_bucket:
            if bucket and len(entries) < count:
                entries.append(bucket.pop(0))
    return entries


def _spread(ctx: ArmContext, entries: list[int], score: dict[int, float], window: TimeSpan) -> None:
    """Spread activation along temporal and causal links for a few rounds: a neighbour scores
    max(its own window fit, parent x link weight x boost x 0.7)."""
    s = ctx.settings
    frontier = list(entries)
    spans: dict[int, tuple[datetime, datetime]] = {}
    read: dict[int, list[tuple[int, str, float]]] = {}
    # A neighbour's own fit, worked out once: facts close in time are each other's
    # neighbours, so most are met from several nodes (~500 meetings, ~200 facts a query).
    fits: dict[int, float] = {}
    for _ in range(s.temporal_rounds):
        frontier = sorted(frontier, key=lambda f: -score[f])[: s.temporal_nodes_per_round]
        if not frontier:
            break
        next_frontier: list[int] = []
        # A node whose score rose again is expanded again: its neighbours are read once,
        # the round's new nodes' in one read.
        unread = [node for node in frontier if node not in read]
        fresh = ctx.store.links.time_neighbours_of(
            unread,
            s.temporal_neighbours,
            _LINK_RULE.temporal_link_max_hours,
            _LINK_RULE.temporal_link_floor,
        )
        read.update((node, fresh.get(node, [])) for node in unread)
        around = {node: read[node] for node in frontier}
        # The round's neighbours' times in one read (one probe each was most of the arm).
        unknown = {o for found in around.values() for o, _, _ in found if o not in spans}
        spans.update(calendar_spans(ctx.store.search.fact_time_spans(sorted(unknown))))
        for node in frontier:
            for other, kind, weight in around[node]:
                boost = CAUSAL_BOOST if kind == "causal" else TEMPORAL_BOOST
                spread = min(1.0, score[node] * weight * boost * s.temporal_spread_factor)
                own = fits.get(other)
                if own is None:
                    own = fits[other] = _own_fit(spans.get(other), window)
                new = max(own, spread)
                if new > score.get(other, 0.0) and new > s.temporal_expand_floor:
                    score[other] = new
                    next_frontier.append(other)
        frontier = next_frontier


def _own_fit(span: tuple[datetime, datetime] | None, window: TimeSpan) -> float:
    """A neighbour's score from its own time (span None: the fact is gone)."""
    if span is None:
        return 0.0
    # Without a query match a neighbour gets only half of its window fit.
    return 0.5 * proximity(span[0], span[1], window)
