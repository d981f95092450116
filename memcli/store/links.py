"""Links between facts (semantic, causal) and the time axis.

Temporal neighbours are not stored: they are read at query time from the facts' event_time
index (facts_event_time), nearest first on each side of a fact. Stored, they were most of the
rows of a store (~39 links per fact, 2 KB) and every retain wrote 40 of them per fact;
computed, they also never go stale when facts are added or replaced later.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from memcli.store.types import iso, marks


class LinksMixin:
    conn: Any

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
        heaviest first, at most `limit`. A fact of the same bank at most max_hours away
        weighs max(floor, 1 - hours / 24); a causal link weighs what it stores."""
        row = self.conn.execute(
            "SELECT bank_id, event_time FROM facts WHERE id = ?", (fact_id,)
        ).fetchone()
        if row is None:
            return []
        bank_id, when_text = row
        when = datetime.fromisoformat(when_text)
        # Its causal links out (by the fact they point to) and in (by the fact they come
        # from). The links coming in are found on links_to alone, which holds their kind,
        # and only causal ones are read for their weight: reading every incoming link's row
        # to learn its kind was most of the lookup (24 -> 7 us a fact at 100k facts).
        out: list[tuple[int, str, float]] = [
            (other, "causal", weight)
            for other, weight in self.conn.execute(
                "SELECT to_fact, weight FROM links WHERE from_fact = ? AND kind = 'causal' "
                "UNION ALL SELECT l.from_fact, l.weight FROM links l WHERE l.to_fact = ? "
                "AND l.kind = 'causal' AND l.from_fact IN (SELECT from_fact FROM links "
                "WHERE to_fact = ? AND kind = 'causal')",
                (fact_id, fact_id, fact_id),
            )
        ]
        lo = iso(when - timedelta(hours=max_hours))
        hi = iso(when + timedelta(hours=max_hours))
        # (hours apart, ids apart, id): facts said at the same time (a conversation's turns
        # often share one) are taken nearest in the order they were stored.
        near: list[tuple[float, int, int]] = [
            (0.0, abs(other - fact_id), other)
            for (other,) in self.conn.execute(
                "SELECT id FROM facts WHERE bank_id = ? AND event_time = ? AND id != ? "
                "ORDER BY abs(id - ?) LIMIT ?",
                (bank_id, when_text, fact_id, fact_id, 2 * limit),
            )
        ]
        for cond, args, order in (
            ("event_time < ? AND event_time >= ?", (when_text, lo), "DESC"),
            ("event_time > ? AND event_time <= ?", (when_text, hi), "ASC"),
        ):
            for other, t in self.conn.execute(
                f"SELECT id, event_time FROM facts WHERE bank_id = ? AND {cond} "
                f"ORDER BY event_time {order} LIMIT ?",
                (bank_id, *args, limit),
            ):
                hours = abs((datetime.fromisoformat(t) - when).total_seconds()) / 3600
                near.append((hours, abs(other - fact_id), other))
        near.sort()
        out.extend(
            (other, "temporal", max(floor, 1.0 - hours / 24.0)) for hours, _, other in near[:limit]
        )
        # Heaviest first; the sort is stable, so equal weights keep the nearest first.
        out.sort(key=lambda n: -n[2])
        return out[:limit]

    def link_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM links").fetchone()[0]
