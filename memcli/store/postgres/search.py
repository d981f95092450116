"""store.search on PostgreSQL: the keyword arm's full-text search, time windows and fact
filters.

Keywords: fact_fts.doc is a tsvector (Snowball English stems; CJK characters indexed one a
token, as on SQLite, fts.index_text), searched with a tsquery that ORs the search terms, each
a bound parameter to phraseto_tsquery (a CJK run is the phrase of its characters, so its
character pairs match as on SQLite), and ranked by ts_rank_cd with the arm's column weights
(text A, context B, entities C, lead-in D) and length normalisation 1 (divided by 1 + the log
of the fact's length, as BM25 discounts long documents). ts_rank_cd knows no term rarity
(IDF): bench/RESULTS.md says what that costs against FTS5's BM25. The score handed back is
minus the rank, lower-is-better as bm25() is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memcli.store.postgres.core import PgCore
from memcli.store.postgres.sql import filter_active, filter_sql, query_sql, rank_weights
from memcli.store.types import iso

# ts_rank_cd's normalisation: 1 = rank / (1 + log(length)).
RANK_NORMALIZATION = 1


def window_sql(
    start: datetime, end: datetime, said: tuple[datetime, datetime] | None
) -> tuple[str, list[Any]]:
    """The condition on facts f that their time overlaps [start, end) (the rule of the
    SQLite store's in_window_among): a fact with no stated period is the instant it was
    said, checked against `said` (the same window as instants; None: the window); a period
    starts inside and ends after the start, or starts before and ends inside or after."""
    s, e = iso(start), iso(end)
    su, eu = (iso(said[0]), iso(said[1])) if said is not None else (s, e)
    rule = (
        "(CASE WHEN f.occurred_start IS NULL THEN (f.event_time >= %s AND f.event_time < %s) "
        "ELSE ((f.event_time >= %s AND f.event_time < %s AND "
        "(f.occurred_end IS NULL OR f.occurred_end > %s)) "
        "OR (f.occurred_end IS NOT NULL AND f.occurred_end > %s AND f.event_time < %s)) END)"
    )
    # The time index narrows first: every fact inside starts before the later end.
    lo = min(s, su)  # type: ignore[type-var]
    hi = max(e, eu)  # type: ignore[type-var]
    bound = "(f.event_time < %s AND (f.event_time >= %s OR f.occurred_end IS NOT NULL)) AND "
    return bound + rule, [hi, lo, su, eu, s, e, s, s, s]


class PgSearch:
    def __init__(self, core: PgCore) -> None:
        self.core = core
        self.conn = core.conn

    def keyword_search(
        self,
        bank_id: int,
        terms: Sequence[str],
        column_weights: Sequence[float],
        flt: Any,
        limit: int,
    ) -> list[tuple[int, float]]:
        built = query_sql(list(terms))
        if built is None or limit <= 0:
            return []
        tsquery, query_params = built
        cond, params = filter_sql(flt, "f")
        rows = self.conn.execute(
            "SELECT x.fact_id, ts_rank_cd(%s::float4[], x.doc, q.q, %s) AS r "
            f"FROM (SELECT {tsquery} AS q) q JOIN fact_fts x ON x.doc @@ q.q "
            f"JOIN facts f ON f.id = x.fact_id WHERE f.bank_id = %s{cond} "
            "ORDER BY r DESC, x.fact_id LIMIT %s",
            (
                rank_weights(column_weights),
                RANK_NORMALIZATION,
                *query_params,
                bank_id,
                *params,
                limit,
            ),
        ).fetchall()
        return [(fid, -float(r)) for fid, r in rows]

    def own_words_match(self, fact_ids: Sequence[int], terms: Sequence[str]) -> set[int]:
        built = query_sql(list(terms))
        if not fact_ids or built is None:
            return set()
        tsquery, query_params = built
        rows = self.conn.execute(
            f"SELECT x.fact_id FROM (SELECT {tsquery} AS q) q JOIN fact_fts x "
            "ON ts_filter(x.doc, '{a,b,c}') @@ q.q WHERE x.fact_id = ANY(%s)",
            (*query_params, [int(i) for i in fact_ids]),
        ).fetchall()
        return {r[0] for r in rows}

    def keyword_match_count(self, term: str) -> int:
        built = query_sql([term])
        if built is None:
            return 0
        tsquery, query_params = built
        return self.conn.execute(
            f"SELECT count(*) FROM fact_fts WHERE doc @@ {tsquery}", query_params
        ).fetchone()[0]

    def fact_ids_in_window(
        self,
        bank_id: int,
        start: datetime,
        end: datetime,
        flt: Any,
        said: tuple[datetime, datetime] | None = None,
    ) -> np.ndarray:
        rule, rule_params = window_sql(start, end, said)
        cond, params = filter_sql(flt, "f")
        rows = self.conn.execute(
            f"SELECT f.id FROM facts f WHERE f.bank_id = %s AND {rule}{cond} ORDER BY f.id",
            (bank_id, *rule_params, *params),
        ).fetchall()
        return np.array([r[0] for r in rows], dtype=np.int64)

    def facts_starting_in(self, bank_id: int, start: datetime, end: datetime, cap: int) -> int:
        return self.conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM facts WHERE bank_id = %s AND event_time >= %s "
            "AND event_time < %s LIMIT %s) s",
            (bank_id, iso(start), iso(end), cap),
        ).fetchone()[0]

    def in_window_among(
        self,
        fact_ids: Sequence[int],
        start: datetime,
        end: datetime,
        flt: Any,
        said: tuple[datetime, datetime] | None = None,
    ) -> set[int]:
        rule, rule_params = window_sql(start, end, said)
        cond, params = filter_sql(flt, "f")
        rows = self.conn.execute(
            f"SELECT f.id FROM facts f WHERE f.id = ANY(%s) AND {rule}{cond}",
            ([int(i) for i in fact_ids], *rule_params, *params),
        ).fetchall()
        return {r[0] for r in rows}

    def fact_time_spans(
        self, fact_ids: Sequence[int]
    ) -> dict[int, tuple[datetime, datetime, bool]]:
        rows = self.conn.execute(
            "SELECT id, event_time, coalesce(occurred_end, event_time), "
            "occurred_start IS NOT NULL FROM facts WHERE id = ANY(%s)",
            ([int(i) for i in fact_ids],),
        ).fetchall()
        return {
            fid: (datetime.fromisoformat(begin), datetime.fromisoformat(finish), bool(period))
            for fid, begin, finish, period in rows
        }

    def fact_time_span(self, fact_id: int) -> tuple[datetime, datetime] | None:
        row = self.conn.execute(
            "SELECT event_time, coalesce(occurred_end, event_time) FROM facts WHERE id = %s",
            (fact_id,),
        ).fetchone()
        if row is None:
            return None
        return datetime.fromisoformat(row[0]), datetime.fromisoformat(row[1])

    def first_passing(
        self, ordered: Sequence[int], flt: Any, bank_id: int | None, n: int
    ) -> list[int]:
        """The first n of `ordered` that pass the filter and belong to the bank: all checked
        in one statement (a round trip costs more than checking a few hundred more ids)."""
        if n <= 0 or not len(ordered):
            return []
        passing = self.filter_facts(ordered, flt, bank_id)
        return [f for f in ordered if f in passing][:n]

    def filter_facts(
        self, fact_ids: Sequence[int], flt: Any, bank_id: int | None = None
    ) -> set[int]:
        ids = [int(i) for i in fact_ids]
        if not filter_active(flt) and bank_id is None:
            return set(ids)
        if not ids:
            return set()
        cond, params = filter_sql(flt, "f")
        bank_cond = "" if bank_id is None else " AND f.bank_id = %s"
        bank_args = [] if bank_id is None else [bank_id]
        rows = self.conn.execute(
            f"SELECT f.id FROM facts f WHERE f.id = ANY(%s){bank_cond}{cond}",
            (ids, *bank_args, *params),
        ).fetchall()
        return {r[0] for r in rows}
