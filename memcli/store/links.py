"""Links between facts (semantic, causal) and the time axis.

Temporal neighbours are not stored: they are read at query time from the facts' event_time
index (facts_event_time), nearest first on each side of a fact. Stored, they were most of the
rows of a store (~39 links per fact, 2 KB) and every retain wrote 40 of them per fact;
computed, they also never go stale when facts are added or replaced later.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from memcli.store.core import StoreCore
from memcli.store.types import id_json, iso, marks

# For each node [id, bank, event time, earliest, latest]: its causal links out (by the fact
# they point to) and in (by the fact they come from), then the facts of its bank said at its
# time (nearest ids first), before it and after it within the reach, nearest first on the
# time index. The links coming in are found on links_to alone, which holds their kind, and
# only causal ones are read for their weight: reading every incoming link's row to learn its
# kind was most of the lookup (24 -> 7 us a fact at 100k facts).
TIME_NEIGHBOURS_SQL = """
SELECT json_group_array(json_array(n.id, n.t,
  json((SELECT json_group_array(json_array(c.other, c.weight) ORDER BY c.part, c.other) FROM (
    SELECT 0 AS part, to_fact AS other, weight FROM links
    WHERE from_fact = n.id AND kind = 'causal'
    UNION ALL SELECT 1, l.from_fact, l.weight FROM links l WHERE l.to_fact = n.id
    AND l.kind = 'causal' AND l.from_fact IN (SELECT from_fact FROM links
    WHERE to_fact = n.id AND kind = 'causal')) AS c)),
  json((SELECT json_group_array(s.id) FROM (SELECT id FROM facts
    WHERE bank_id = n.bank AND event_time = n.t AND id != n.id
    ORDER BY abs(id - n.id) LIMIT :same) AS s)),
  json((SELECT json_group_array(json_array(b.id, b.event_time)) FROM (SELECT id, event_time
    FROM facts WHERE bank_id = n.bank AND event_time < n.t AND event_time >= n.lo
    ORDER BY event_time DESC LIMIT :side) AS b)),
  json((SELECT json_group_array(json_array(a.id, a.event_time)) FROM (SELECT id, event_time
    FROM facts WHERE bank_id = n.bank AND event_time > n.t AND event_time <= n.hi
    ORDER BY event_time ASC LIMIT :side) AS a))))
FROM (SELECT value ->> 0 AS id, value ->> 1 AS bank, value ->> 2 AS t, value ->> 3 AS lo,
  value ->> 4 AS hi FROM json_each(:nodes)) AS n
"""


def _shifted(when: datetime, by: timedelta) -> str:
    """iso(when + by), held at the ends of datetime's range (a fact dated in year 1)."""
    try:
        return iso(when + by)  # type: ignore[return-value]
    except OverflowError:
        return iso(datetime.min if by < timedelta(0) else datetime.max)  # type: ignore[return-value]


class LinksPart:
    """store.links: stored links between facts, and facts near each other in time."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core
        self.conn = core.conn

    def add_links(self, rows: Iterable[tuple[int, int, str, float]]) -> None:
        """(from_fact, to_fact, kind, weight); an existing link keeps the larger weight."""
        self.conn.executemany(
            "INSERT INTO links(from_fact, to_fact, kind, weight) VALUES(?, ?, ?, ?) "
            "ON CONFLICT(from_fact, to_fact, kind) DO UPDATE SET "
            "weight = max(weight, excluded.weight)",
            rows,
        )

    def links_from(self, seeds: Sequence[int], kind: str) -> list[tuple[int, int, float]]:
        """(seed, other end, weight) for links of one kind touching the seeds, either
        direction."""
        if not seeds:
            return []
        m = marks(len(seeds))
        return self.conn.execute(
            "SELECT from_fact, to_fact, weight FROM links "
            f"WHERE kind = ? AND from_fact IN ({m}) "
            "UNION ALL SELECT to_fact, from_fact, weight FROM links "
            f"WHERE kind = ? AND to_fact IN ({m})",
            (kind, *seeds, kind, *seeds),
        ).fetchall()

    def time_neighbours(
        self, fact_id: int, limit: int, max_hours: float, floor: float
    ) -> list[tuple[int, str, float]]:
        """(other, kind, weight) of the fact's nearest facts in time and its causal links,
        heaviest first, at most `limit` (time_neighbours_of for one fact)."""
        return self.time_neighbours_of([fact_id], limit, max_hours, floor).get(fact_id, [])

    def time_neighbours_of(
        self, fact_ids: Sequence[int], limit: int, max_hours: float, floor: float
    ) -> dict[int, list[tuple[int, str, float]]]:
        """fact id -> (other, kind, weight) of its nearest facts in time and its causal
        links, heaviest first, at most `limit`, for each of these facts that exists. A fact
        of the same bank at most max_hours away weighs max(floor, 1 - hours / 24); a causal
        link weighs what it stores.

        Two statements for all the facts, each answered as one row: the temporal arm reads
        the neighbours of ~20 facts a round, and five statements a fact, a row per neighbour,
        beside the other arms' threads handed the GIL back and forth ~2,000 times a query."""
        (found,) = self.conn.execute(
            "SELECT json_group_array(json_array(f.id, f.bank_id, f.event_time)) "
            "FROM json_each(?) AS j JOIN facts f ON f.id = j.value",
            (id_json(fact_ids),),
        ).fetchone()
        nodes = []
        reach = timedelta(hours=max_hours)
        for fact_id, bank_id, when_text in json.loads(found):
            when = datetime.fromisoformat(when_text)
            nodes.append(
                [fact_id, bank_id, when_text, _shifted(when, -reach), _shifted(when, reach)]
            )
        if not nodes:
            return {}
        (rows,) = self.conn.execute(
            TIME_NEIGHBOURS_SQL, {"nodes": json.dumps(nodes), "same": 2 * limit, "side": limit}
        ).fetchone()
        out: dict[int, list[tuple[int, str, float]]] = {}
        for fact_id, when_text, causal, same, before, after in json.loads(rows):
            when = datetime.fromisoformat(when_text)
            near: list[tuple[float, int, int]] = [
                (0.0, abs(other - fact_id), other) for other in same
            ]
            for other, t in before + after:
                hours = abs((datetime.fromisoformat(t) - when).total_seconds()) / 3600
                near.append((hours, abs(other - fact_id), other))
            near.sort()
            found_links = [(other, "causal", weight) for other, weight in causal]
            found_links.extend(
                (other, "temporal", max(floor, 1.0 - hours / 24.0))
                for hours, _, other in near[:limit]
            )
            # Heaviest first; the sort is stable, so equal weights keep the nearest first.
            found_links.sort(key=lambda n: -n[2])
            out[fact_id] = found_links[:limit]
        return out

    def link_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM links").fetchone()[0]

    def fact_links(self, fact_id: int) -> list[tuple[str, str, float, int, str]]:
        """(direction 'out'|'in', kind, weight, other fact id, other text), heaviest first."""
        return self.conn.execute(
            "SELECT 'out', l.kind, l.weight, l.to_fact, f.text FROM links l "
            "JOIN facts f ON f.id = l.to_fact WHERE l.from_fact = ? "
            "UNION ALL SELECT 'in', l.kind, l.weight, l.from_fact, f.text FROM links l "
            "JOIN facts f ON f.id = l.from_fact WHERE l.to_fact = ? "
            "ORDER BY 3 DESC, 4",
            (fact_id, fact_id),
        ).fetchall()
