"""store.links on PostgreSQL: stored links between facts (semantic, causal), and facts near
each other in time, read from the time index at query time (the rules of store/links.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from memcli.store.links import _shifted
from memcli.store.postgres.core import PgCore

# For each node (id, bank, event time, earliest, latest): its causal links out and in, the
# facts of its bank said at its time (nearest ids first), and those before and after it
# within the reach, nearest first on the time index.
TIME_NEIGHBOURS_SQL = """
SELECT n.id, n.t,
  ARRAY(SELECT ARRAY[c.other::float8, c.weight] FROM (
    SELECT 0 AS part, to_fact AS other, weight FROM links
    WHERE from_fact = n.id AND kind = 'causal'
    UNION ALL SELECT 1, l.from_fact, l.weight FROM links l WHERE l.to_fact = n.id
    AND l.kind = 'causal') AS c ORDER BY c.part, c.other),
  ARRAY(SELECT s.id FROM facts s WHERE s.bank_id = n.bank AND s.event_time = n.t
    AND s.id != n.id ORDER BY abs(s.id - n.id), s.id LIMIT %(same)s),
  ARRAY(SELECT ROW(b.id, b.event_time)::text FROM (SELECT id, event_time FROM facts
    WHERE bank_id = n.bank AND event_time < n.t AND event_time >= n.lo
    ORDER BY event_time DESC LIMIT %(side)s) AS b),
  ARRAY(SELECT ROW(a.id, a.event_time)::text FROM (SELECT id, event_time FROM facts
    WHERE bank_id = n.bank AND event_time > n.t AND event_time <= n.hi
    ORDER BY event_time ASC LIMIT %(side)s) AS a)
FROM unnest(%(ids)s::bigint[], %(banks)s::bigint[], %(times)s::text[], %(los)s::text[],
  %(his)s::text[]) AS n(id, bank, t, lo, hi)
"""


def _pairs(rows: list[str]) -> list[tuple[int, str]]:
    """(id, time) pairs from ROW(...)::text values: "(12,2026-01-01T00:00:00)"."""
    out = []
    for text in rows:
        fid, _, when = text[1:-1].partition(",")
        out.append((int(fid), when.strip('"')))
    return out


class PgLinks:
    def __init__(self, core: PgCore) -> None:
        self.core = core
        self.conn = core.conn

    def add_links(self, rows: Iterable[tuple[int, int, str, float]]) -> None:
        rows = list(rows)
        if not rows:
            return
        froms, tos, kinds, weights = (list(col) for col in zip(*rows))
        # One statement; a link given twice in one call keeps its larger weight first.
        self.conn.execute(
            "INSERT INTO links(from_fact, to_fact, kind, weight) "
            "SELECT a, b, k, max(w) FROM unnest(%s::bigint[], %s::bigint[], %s::text[], "
            "%s::float8[]) AS r(a, b, k, w) GROUP BY a, b, k "
            "ON CONFLICT(from_fact, to_fact, kind) DO UPDATE SET "
            "weight = greatest(links.weight, excluded.weight)",
            (froms, tos, kinds, weights),
        )

    def links_from(self, seeds: Sequence[int], kind: str) -> list[tuple[int, int, float]]:
        if not seeds:
            return []
        ids = [int(s) for s in seeds]
        return self.conn.execute(
            "SELECT from_fact, to_fact, weight FROM links WHERE kind = %s AND from_fact = ANY(%s) "
            "UNION ALL SELECT to_fact, from_fact, weight FROM links "
            "WHERE kind = %s AND to_fact = ANY(%s)",
            (kind, ids, kind, ids),
        ).fetchall()

    def time_neighbours(
        self, fact_id: int, limit: int, max_hours: float, floor: float
    ) -> list[tuple[int, str, float]]:
        return self.time_neighbours_of([fact_id], limit, max_hours, floor).get(fact_id, [])

    def time_neighbours_of(
        self, fact_ids: Sequence[int], limit: int, max_hours: float, floor: float
    ) -> dict[int, list[tuple[int, str, float]]]:
        found = self.conn.execute(
            "SELECT id, bank_id, event_time FROM facts WHERE id = ANY(%s)",
            ([int(i) for i in dict.fromkeys(fact_ids)],),
        ).fetchall()
        if not found:
            return {}
        reach = timedelta(hours=max_hours)
        ids, banks, times, los, his = [], [], [], [], []
        for fact_id, bank_id, when_text in found:
            when = datetime.fromisoformat(when_text)
            ids.append(fact_id)
            banks.append(bank_id)
            times.append(when_text)
            los.append(_shifted(when, -reach))
            his.append(_shifted(when, reach))
        rows = self.conn.execute(
            TIME_NEIGHBOURS_SQL,
            {
                "ids": ids,
                "banks": banks,
                "times": times,
                "los": los,
                "his": his,
                "same": 2 * limit,
                "side": limit,
            },
        ).fetchall()
        out: dict[int, list[tuple[int, str, float]]] = {}
        for fact_id, when_text, causal, same, before, after in rows:
            when = datetime.fromisoformat(when_text)
            near: list[tuple[float, int, int]] = [
                (0.0, abs(other - fact_id), other) for other in same
            ]
            for other, t in _pairs(before) + _pairs(after):
                hours = abs((datetime.fromisoformat(t) - when).total_seconds()) / 3600
                near.append((hours, abs(other - fact_id), other))
            near.sort()
            found_links = [(int(other), "causal", weight) for other, weight in causal]
            found_links.extend(
                (other, "temporal", max(floor, 1.0 - hours / 24.0))
                for hours, _, other in near[:limit]
            )
            found_links.sort(key=lambda n: -n[2])
            out[fact_id] = found_links[:limit]
        return out

    def link_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM links").fetchone()[0]

    def fact_links(self, fact_id: int) -> list[tuple[str, str, float, int, str]]:
        return self.conn.execute(
            "SELECT 'out', l.kind, l.weight, l.to_fact, f.text FROM links l "
            "JOIN facts f ON f.id = l.to_fact WHERE l.from_fact = %s "
            "UNION ALL SELECT 'in', l.kind, l.weight, l.from_fact, f.text FROM links l "
            "JOIN facts f ON f.id = l.from_fact WHERE l.to_fact = %s "
            "ORDER BY 3 DESC, 4",
            (fact_id, fact_id),
        ).fetchall()
