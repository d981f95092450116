"""The reads recall's arms make: keyword (FTS5 BM25), time windows, fact filters.

A filter is any object with `types`, `tags` and `tags_match` (recall/filters.py's
FactFilter); it is turned into SQL here so arms filter before they truncate. Keyword
searches take search terms (fts.query_terms) and make the FTS5 expression here: no caller
writes FTS5 syntax.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memcli import fts
from memcli.store.core import StoreCore
from memcli.store.protocol import FactFilterLike
from memcli.store.types import id_json, iso, marks

# keyword_search ranks this many times its limit in FTS5 alone before checking bank and filter.
KEYWORD_OVERFETCH = 2


def filter_sql(flt: FactFilterLike | None, alias: str = "f") -> tuple[str, list]:
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
        untagged = f"NOT EXISTS (SELECT 1 FROM fact_tags t WHERE t.fact_id = {alias}.id)"
        # The tags as one JSON parameter: a list of them as many (?) passed SQLite's limit
        # of variables ("too many SQL variables" for an agent's 40,000 tags).
        matched = (
            f"(SELECT count(DISTINCT t.tag) FROM fact_tags t "
            f"WHERE t.fact_id = {alias}.id AND t.tag IN (SELECT value FROM json_each(?)))"
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
        params.append(json.dumps(tags))
    if not parts:
        return "", []
    return " AND " + " AND ".join(parts), params


def filter_active(flt: FactFilterLike | None) -> bool:
    return flt is not None and bool(
        flt.types or flt.tags or getattr(flt, "valid_only", False) or getattr(flt, "as_of", None)
    )


def _id_array(text: str | None) -> np.ndarray:
    """The ids of a group_concat (comma-separated integers; None for no rows)."""
    if not text:
        return np.zeros(0, dtype=np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")


class SearchPart:
    """store.search: the keyword arm's FTS5 queries, time windows and fact filters."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core
        self.conn = core.conn

    def keyword_search(
        self,
        bank_id: int,
        terms: Sequence[str],
        column_weights: Sequence[float],
        flt: FactFilterLike | None,
        limit: int,
    ) -> list[tuple[int, float]]:
        """(fact id, bm25) best first for facts matching any of the search terms
        (fts.query_terms: each becomes a quoted FTS5 string, never raw user text; none: no
        hits); bm25 is lower-is-better. column_weights: text, context, entities, lead-in.

        FTS5 ranks its matches fastest on its own. Joined to facts (for the bank and the
        filter), every match's row was looked up before the sort: a question of common words
        matches 20-40k of 100k facts, and the join was 40% of the arm (19 of 27 ms against 11
        ranked alone). So the best KEYWORD_OVERFETCH x limit are ranked alone and then checked;
        only when too few of them pass (another bank holds most matches, a narrow filter)
        does the joined query run. Either way the result is the bank's best `limit`."""
        expression = fts.match_expression(list(terms))
        if expression is None:
            return []
        weights = ", ".join(str(float(w)) for w in column_weights)
        fetch = limit * KEYWORD_OVERFETCH
        ranked = self.conn.execute(
            f"SELECT rowid, bm25(fact_fts, {weights}) AS rank FROM fact_fts "
            "WHERE fact_fts MATCH ? ORDER BY rank LIMIT ?",
            (expression, fetch),
        ).fetchall()
        kept = self.first_passing([r[0] for r in ranked], flt, bank_id, limit)
        if len(kept) >= limit or len(ranked) < fetch:
            # Enough passed, or these were all the matches: no better match is left out.
            bm25 = dict(ranked)
            return [(fid, bm25[fid]) for fid in kept]
        cond, params = filter_sql(flt, "f")
        return self.conn.execute(
            f"SELECT fact_fts.rowid, bm25(fact_fts, {weights}) AS rank FROM fact_fts "
            "JOIN facts f ON f.id = fact_fts.rowid "
            f"WHERE fact_fts MATCH ? AND f.bank_id = ?{cond} ORDER BY rank LIMIT ?",
            (expression, bank_id, *params, limit),
        ).fetchall()

    def own_words_match(self, fact_ids: Sequence[int], terms: Sequence[str]) -> set[int]:
        """Of these facts, those whose own words (text, speaker, entity names) hold one of
        the search terms (fts.query_terms); not the lead-in, which holds what was said
        before."""
        expression = fts.match_expression(list(terms))
        if not fact_ids or expression is None:
            return set()
        # The match alone, then the ids: with `rowid IN (...)` beside it SQLite ran the
        # full-text query again for every id (120 ms for 17 CJK terms and 200 ids; 0.6 ms so).
        wanted = set(fact_ids)
        rows = self.conn.execute(
            "SELECT rowid FROM fact_fts WHERE fact_fts MATCH ?",
            (f"{{text context entities}} : ({expression})",),
        )
        return {r[0] for r in rows if r[0] in wanted}

    def own_words_match_all(self, fact_ids: Sequence[int], terms: Sequence[str]) -> set[int]:
        """Of these facts, those whose own words hold every one of the search terms (one
        statement, where asking term by term took a query per CJK character and pair)."""
        if not fact_ids or not terms:
            return set()
        expression = " AND ".join(fts.term_expression(t) for t in terms)
        # The match alone, then the ids: with `rowid IN (...)` beside it SQLite ran the
        # full-text query again for every id (120 ms for 17 CJK terms and 200 ids; 0.6 ms so).
        wanted = set(fact_ids)
        rows = self.conn.execute(
            "SELECT rowid FROM fact_fts WHERE fact_fts MATCH ?",
            (f"{{text context entities}} : ({expression})",),
        )
        return {r[0] for r in rows if r[0] in wanted}

    def keyword_match_count(self, term: str) -> int:
        """How many facts (of any bank) hold a search term: its rarity."""
        return self.conn.execute(
            "SELECT count(*) FROM fact_fts WHERE fact_fts MATCH ?", (fts.term_expression(term),)
        ).fetchone()[0]

    def fact_ids_in_window(
        self,
        bank_id: int,
        start: datetime,
        end: datetime,
        flt: FactFilterLike | None,
        said: tuple[datetime, datetime] | None = None,
    ) -> np.ndarray:
        """Facts whose time overlaps [start, end), as an array of ids. Spans are half-open:
        a fact's occurred_end is exclusive, a bare time is a point.

        A fact's period (occurred_start..) is a span of the speaker's calendar ("yesterday"
        is a local day), a fact without one is dated by the instant it was said (UTC). So
        `said`, the same window as instants, is what the latter are checked against (None:
        the window itself).

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
        # Each read answers as one row (see facts_by_id): the temporal arm lists a window
        # beside the semantic arm's thread, and the periods running across a window's
        # start can be thousands.
        inside = self._starting_inside(bank_id, start, end, said, cond, params)
        (ended,) = self.conn.execute(
            "SELECT group_concat(id) FROM facts WHERE bank_id = ? AND occurred_end IS NOT NULL "
            "AND occurred_end <= ? AND event_time >= ? AND event_time < ?",
            (bank_id, iso(start), iso(start), iso(end)),
        ).fetchone()
        if ended:
            inside = inside[~np.isin(inside, _id_array(ended))]
        (across,) = self.conn.execute(
            "SELECT group_concat(f.id) FROM facts f WHERE f.bank_id = ? AND f.occurred_end > ? "
            f"AND f.occurred_end IS NOT NULL AND f.event_time < ?{cond}",
            (bank_id, iso(start), iso(start), *params),
        ).fetchone()
        if not across:
            return inside
        return np.concatenate([inside, _id_array(across)])

    def _starting_inside(
        self,
        bank_id: int,
        start: datetime,
        end: datetime,
        said: tuple[datetime, datetime] | None,
        cond: str,
        params: Sequence[Any],
    ) -> np.ndarray:
        """The facts whose time starts inside the window: in [start, end) for a period, in
        `said` for an instant. Where the two ranges overlap every fact is inside whichever it
        has, so the index answers alone; only the few hours between their ends (the zone's
        offset) are checked fact by fact."""
        head = "SELECT group_concat(f.id) FROM facts f WHERE f.bank_id = ? "
        between = "AND f.event_time >= ? AND f.event_time < ?"
        in_range = "f.event_time >= ? AND f.event_time < ?"
        rule = f"CASE WHEN f.occurred_start IS NULL THEN ({in_range}) ELSE ({in_range}) END"
        if said is None or said == (start, end):
            ranges, edges = [(start, end)], []
        else:
            lo, hi = max(start, said[0]), min(end, said[1])
            outer = (min(start, said[0]), max(end, said[1]))
            ranges = [(lo, hi)] if lo < hi else []
            edges = [(outer[0], lo), (hi, outer[1])] if lo < hi else [outer]
        parts = [
            _id_array(
                self.conn.execute(
                    f"{head}{between}{cond}", (bank_id, iso(a), iso(b), *params)
                ).fetchone()[0]
            )
            for a, b in ranges
        ]
        for a, b in edges:
            if a < b:
                args = (iso(said[0]), iso(said[1]), iso(start), iso(end))  # type: ignore[index]
                row = self.conn.execute(
                    f"{head}{between} AND {rule}{cond}", (bank_id, iso(a), iso(b), *args, *params)
                ).fetchone()
                parts.append(_id_array(row[0]))
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def facts_starting_in(self, bank_id: int, start: datetime, end: datetime, cap: int) -> int:
        """How many of the bank's facts have an event time in [start, end), counted on the
        time index up to `cap` (a count that only has to decide)."""
        return self.conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM facts WHERE bank_id = ? AND event_time >= ? "
            "AND event_time < ? LIMIT ?)",
            (bank_id, iso(start), iso(end), cap),
        ).fetchone()[0]

    def in_window_among(
        self,
        fact_ids: Sequence[int],
        start: datetime,
        end: datetime,
        flt: FactFilterLike | None,
        said: tuple[datetime, datetime] | None = None,
    ) -> set[int]:
        """Which of these facts overlap [start, end) and pass the filter (the rule of
        fact_ids_in_window, `said` included, checked on each fact found by id)."""
        cond, params = filter_sql(flt, "f")
        s, e = iso(start), iso(end)
        su, eu = (iso(said[0]), iso(said[1])) if said is not None else (s, e)
        # A fact said at an instant is inside when that instant is; a period when it starts
        # inside or starts before and ends after the window's start.
        instant = "+f.event_time >= ? AND +f.event_time < ?"
        period = (
            f"({instant} AND (f.occurred_end IS NULL OR f.occurred_end > ?)) "
            "OR (f.occurred_end IS NOT NULL AND f.occurred_end > ? AND +f.event_time < ?)"
        )
        (found,) = self.conn.execute(
            "SELECT group_concat(f.id) FROM json_each(?) AS j JOIN facts f ON f.id = j.value "
            f"WHERE CASE WHEN f.occurred_start IS NULL THEN ({instant}) ELSE ({period}) END"
            f"{cond}",
            (id_json(list(fact_ids)), su, eu, s, e, s, s, s, *params),
        ).fetchone()
        return set(_id_array(found).tolist())

    def fact_time_spans(
        self, fact_ids: Sequence[int]
    ) -> dict[int, tuple[datetime, datetime, bool]]:
        """id -> (start, end, is_period) of these facts: their period (a span of the speaker's
        calendar, is_period True), else the instant they were said, UTC (start = end)."""
        # One row (see facts_by_id): the temporal arm asks for each round's neighbours.
        (found,) = self.conn.execute(
            "SELECT json_group_array(json_array(f.id, f.event_time, "
            "coalesce(f.occurred_end, f.event_time), f.occurred_start IS NOT NULL)) "
            "FROM json_each(?) AS j JOIN facts f ON f.id = j.value",
            (id_json(fact_ids),),
        ).fetchone()
        return {
            fid: (datetime.fromisoformat(begin), datetime.fromisoformat(finish), bool(period))
            for fid, begin, finish, period in json.loads(found)
        }

    def fact_time_span(self, fact_id: int) -> tuple[datetime, datetime] | None:
        row = self.conn.execute(
            "SELECT event_time, coalesce(occurred_end, event_time) FROM facts WHERE id = ?",
            (fact_id,),
        ).fetchone()
        if row is None:
            return None
        return datetime.fromisoformat(row[0]), datetime.fromisoformat(row[1])

    def first_passing(
        self, ordered: Sequence[int], flt: FactFilterLike | None, bank_id: int | None, n: int
    ) -> list[int]:
        """The first n of `ordered` (best first) that pass the filter and belong to the bank,
        in order: n checked first (most pass: only closed facts and other banks' fail), then
        twice as many as are still missing, as far as needed. The keyword, graph and temporal
        arms rank a few hundred to a few thousand facts and keep 300; checking twice that at
        once was ~0.7 ms of a 100k-fact recall's keyword arm."""
        kept: list[int] = []
        start, step = 0, max(n, 1)
        while start < len(ordered) and len(kept) < n:
            part = ordered[start : start + step]
            passing = self.filter_facts(part, flt, bank_id)
            kept.extend(f for f in part if f in passing)
            start += len(part)
            step = max(2 * (n - len(kept)), 64)
        return kept[:n]

    def filter_facts(
        self, fact_ids: Sequence[int], flt: FactFilterLike | None, bank_id: int | None = None
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
        # One row (see facts_by_id): the graph arm checks ~600 ids beside the main thread.
        (found,) = self.conn.execute(
            "SELECT group_concat(f.id) FROM json_each(?) AS j JOIN facts f ON f.id = j.value "
            f"WHERE 1{bank_cond}{cond}",
            (id_json(ids), *bank_args, *params),
        ).fetchone()
        return set(_id_array(found).tolist())
