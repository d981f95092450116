"""Links between facts (semantic, temporal, causal) and the time axis they are built on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
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

    def facts_near_in_time(
        self, bank_id: int, when: datetime, per_side: int, exclude: int
    ) -> list[tuple[int, datetime]]:
        """Up to per_side facts of the bank on each side of `when` (at or before, after),
        nearest first on each side, as (fact id, event time)."""
        out: list[tuple[int, datetime]] = []
        for op, order in (("<=", "DESC"), (">", "ASC")):
            out.extend(
                (fid, datetime.fromisoformat(t))
                for fid, t in self.conn.execute(
                    f"SELECT id, event_time FROM facts WHERE bank_id = ? AND id != ? "
                    f"AND event_time {op} ? ORDER BY event_time {order} LIMIT ?",
                    (bank_id, exclude, iso(when), per_side),
                )
            )
        return out

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

    def time_neighbours(self, fact_id: int, limit: int) -> list[tuple[int, str, float]]:
        """(other, kind, weight) along temporal and causal links, heaviest first."""
        return self.conn.execute(
            "SELECT other, kind, weight FROM ("
            " SELECT to_fact AS other, kind, weight FROM links WHERE from_fact = ?"
            " AND kind IN ('temporal', 'causal')"
            " UNION ALL SELECT from_fact, kind, weight FROM links WHERE to_fact = ?"
            " AND kind IN ('temporal', 'causal')"
            ") ORDER BY weight DESC LIMIT ?",
            (fact_id, fact_id, limit),
        ).fetchall()

    def link_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM links").fetchone()[0]
