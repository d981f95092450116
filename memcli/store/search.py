"""The reads recall's arms make: keyword (FTS5 BM25), time windows, fact filters.

A filter is any object with `types`, `tags` and `tags_match` (recall/filters.py's
FactFilter); it is turned into SQL here so arms filter before they truncate.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memcli.store.types import batched, id_json, iso, marks

# keyword_search ranks this many times its limit in FTS5 alone before checking bank and filter.
KEYWORD_OVERFETCH = 2


def filter_sql(flt: Any, alias: str = "f") -> tuple[str, list]:
    """A condition (starting with AND, or empty) and its parameters."""
    if flt is None:
        return "", []
    parts: list[str] = []
    params: list = []
    if flt.types:
        parts.append(f"{alias}.fact_type IN ({marks(len(flt.types))})")
        params.extend(flt.types)
    as_of = getattr(flt, "as_of", None)
    if as_of is None and getattr(flt, "valid_only", False):
        parts.append(f"{alias}.invalid_at IS NULL")
    elif as_of is not None:
        # As the store stood then: recorded by then, and not yet closed by a correction.
        parts.append(
            f"{alias}.created_at <= ? AND ({alias}.invalid_at IS NULL OR {alias}.invalid_at > ?)"
        )
        params.extend([iso(as_of), iso(as_of)])
    if flt.tags:
        tags = sorted(set(flt.tags))
        m = marks(len(tags))
        untagged = f"NOT EXISTS (SELECT 1 FROM fact_tags t WHERE t.fact_id = {alias}.id)"
        matched = (
            f"(SELECT count(DISTINCT t.tag) FROM fact_tags t "
            f"WHERE t.fact_id = {alias}.id AND t.tag IN ({m}))"
        )
        total = f"(SELECT count(*) FROM fact_tags t WHERE t.fact_id = {alias}.id)"
        mode = flt.tags_match
        if mode == "any":
            parts.append(f"({untagged} OR {matched} > 0)")
        elif mode == "all":
            parts.append(f"({untagged} OR {matched} = {len(tags)})")
        elif mode == "any_strict":
            parts.append(f"{matched} > 0")
        elif mode == "all_strict":
            parts.append(f"{matched} = {len(tags)}")
        elif mode == "exact":
            parts.append(f"({matched} = {len(tags)} AND {total} = {len(tags)})")
        else:
            raise ValueError(f"unknown tags match mode {mode!r}")
        params.extend(tags)
    if not parts:
        return "", []
    return " AND " + " AND ".join(parts), params


def filter_active(flt: Any) -> bool:
    return flt is not None and bool(
        flt.types or flt.tags or getattr(flt, "valid_only", False) or getattr(flt, "as_of", None)
    )


def _id_array(text: str | None) -> np.ndarray:
    """The ids of a group_concat (comma-separated integers; None for no rows)."""
    if not text:
        return np.zeros(0, dtype=np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")


class SearchMixin:
    conn: Any

    def keyword_search(
        self,
        bank_id: int,
        expression: str,
        column_weights: Sequence[float],
        flt: Any,
        limit: int,
    ) -> list[tuple[int, float]]:
        """(fact id, bm25) best first for an FTS5 MATCH expression built by fts.py (never
        raw user text); bm25 is lower-is-better.

        FTS5 ranks its matches fastest on its own. Joined to facts (for the bank and the
        filter), every match's row was looked up before the sort: a question of common words
        matches 20-40k of 100k facts, and the join was 40% of the arm (19 of 27 ms against 11
        ranked alone). So the best KEYWORD_OVERFETCH x limit are ranked alone and then checked;
        only when too few of them pass (another bank holds most matches, a narrow filter)
        does the joined query run. Either way the result is the bank's best `limit`."""
        weights = ", ".join(str(float(w)) for w in column_weights)
        fetch = limit * KEYWORD_OVERFETCH
        ranked = self.conn.execute(
            f"SELECT rowid, bm25(fact_fts, {weights}) AS rank FROM fact_fts "
            "WHERE fact_fts MATCH ? ORDER BY rank LIMIT ?",
            (expression, fetch),
        ).fetchall()
        passing = self.filter_facts([r[0] for r in ranked], flt, bank_id)  # type: ignore[attr-defined]
        kept = [(fid, score) for fid, score in ranked if fid in passing]
        if len(kept) >= limit or len(ranked) < fetch:
            # Enough passed, or these were all the matches: no better match is left out.
            return kept[:limit]
        cond, params = filter_sql(flt, "f")
        return self.conn.execute(
            f"SELECT fact_fts.rowid, bm25(fact_fts, {weights}) AS rank FROM fact_fts "
            "JOIN facts f ON f.id = fact_fts.rowid "
            f"WHERE fact_fts MATCH ? AND f.bank_id = ?{cond} ORDER BY rank LIMIT ?",
            (expression, bank_id, *params, limit),
        ).fetchall()

    def keyword_match_count(self, expression: str) -> int:
        """How many facts (of any bank) match an FTS5 expression: a term's rarity."""
        return self.conn.execute(
            "SELECT count(*) FROM fact_fts WHERE fact_fts MATCH ?", (expression,)
        ).fetchone()[0]

    def fact_ids_in_window(
        self, bank_id: int, start: datetime, end: datetime, flt: Any
    ) -> np.ndarray:
        """Facts whose time overlaps [start, end), as an array of ids. Spans are half-open:
        a fact's occurred_end is exclusive, a bare time is a point.

        A wide window of a big store holds tens of thousands (97k of 100k facts for "this
        year" in the scale bench), so the ids come back as one group_concat text parsed by
        numpy, and the index on (bank_id, event_time) answers alone: reading every row's
        occurred_end from the table, and a Python tuple per row, was 56 ms for 97k ids
        against 11 ms this way."""
        cond, params = filter_sql(flt, "f")
        # Two disjoint parts, each read through its own index: facts that start inside the
        # window (the time index), less the few of them whose end is at or before the
        # window's start (facts_occurred_end); and facts that start before it and end inside
        # or after it (facts_occurred_end: only facts with an end).
        inside = _id_array(
            self.conn.execute(
                "SELECT group_concat(f.id) FROM facts f WHERE f.bank_id = ? "
                f"AND f.event_time >= ? AND f.event_time < ?{cond}",
                (bank_id, iso(start), iso(end), *params),
            ).fetchone()[0]
        )
        ended = [
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM facts WHERE bank_id = ? AND occurred_end IS NOT NULL "
                "AND occurred_end <= ? AND event_time >= ? AND event_time < ?",
                (bank_id, iso(start), iso(start), iso(end)),
            )
        ]
        if ended:
            inside = inside[~np.isin(inside, np.array(ended, dtype=np.int64))]
        across = [
            r[0]
            for r in self.conn.execute(
                "SELECT f.id FROM facts f WHERE f.bank_id = ? AND f.occurred_end > ? "
                f"AND f.occurred_end IS NOT NULL AND f.event_time < ?{cond}",
                (bank_id, iso(start), iso(start), *params),
            )
        ]
        if not across:
            return inside
        return np.concatenate([inside, np.array(across, dtype=np.int64)])

    def in_window_among(
        self, fact_ids: Sequence[int], start: datetime, end: datetime, flt: Any
    ) -> set[int]:
        """Which of these facts overlap [start, end) and pass the filter (the rule of
        fact_ids_in_window, checked on each fact found by id)."""
        cond, params = filter_sql(flt, "f")
        s, e = iso(start), iso(end)
        rows = self.conn.execute(
            "SELECT f.id FROM json_each(?) AS j JOIN facts f ON f.id = j.value WHERE "
            "((+f.event_time >= ? AND +f.event_time < ? "
            "AND (f.occurred_end IS NULL OR f.occurred_end > ?)) "
            f"OR (f.occurred_end IS NOT NULL AND f.occurred_end > ? AND +f.event_time < ?)){cond}",
            (id_json(list(fact_ids)), s, e, s, s, s, *params),
        )
        return {r[0] for r in rows}

    def fact_time_spans(self, fact_ids: Sequence[int]) -> dict[int, tuple[datetime, datetime]]:
        """id -> (start, end) of these facts (see fact_time_span)."""
        out: dict[int, tuple[datetime, datetime]] = {}
        for batch in batched(list(fact_ids)):
            for fid, begin, finish in self.conn.execute(
                "SELECT id, event_time, coalesce(occurred_end, event_time) FROM facts "
                f"WHERE id IN ({marks(len(batch))})",
                batch,
            ):
                out[fid] = (datetime.fromisoformat(begin), datetime.fromisoformat(finish))
        return out

    def fact_time_span(self, fact_id: int) -> tuple[datetime, datetime] | None:
        row = self.conn.execute(
            "SELECT event_time, coalesce(occurred_end, event_time) FROM facts WHERE id = ?",
            (fact_id,),
        ).fetchone()
        if row is None:
            return None
        return datetime.fromisoformat(row[0]), datetime.fromisoformat(row[1])

    def filter_facts(
        self, fact_ids: Sequence[int], flt: Any, bank_id: int | None = None
    ) -> set[int]:
        """The subset of fact_ids that pass the filter (and belong to the bank, when given):
        for arms whose index cannot filter, like vec0 or the link graph."""
        ids = list(fact_ids)
        if not filter_active(flt) and bank_id is None:
            return set(ids)
        cond, params = filter_sql(flt, "f")
        # "+": rows are found by id; bank and filter only check them (see facts_by_id).
        bank_cond = "" if bank_id is None else " AND +f.bank_id = ?"
        bank_args = [] if bank_id is None else [bank_id]
        rows = self.conn.execute(
            "SELECT f.id FROM json_each(?) AS j JOIN facts f ON f.id = j.value "
            f"WHERE 1{bank_cond}{cond}",
            (id_json(ids), *bank_args, *params),
        )
        return {r[0] for r in rows}
