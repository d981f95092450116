"""store.search on PostgreSQL: the keyword arm's full-text search, time windows and fact
filters.

Keywords: fact_fts.doc is a tsvector (Snowball English stems; CJK characters indexed one a
token, as on SQLite, fts.index_text), found by a tsquery that ORs the search terms, each a
bound parameter to phraseto_tsquery (a CJK run is the phrase of its characters, so its
character pairs match as on SQLite), on the GIN index. They are ranked by BM25 as FTS5's
bm25() ranks (k1 1.2, b 0.75, IDF over the whole index floored at 1e-6, the arm's column
weights on each column's occurrences): a term's occurrences in a fact, weighted by column,
are ts_rank_cd of that term alone with the weights (text A, context B, entities C, lead-in
D) and no normalisation; a fact's length and the index's totals and each lexeme's row count
are kept beside it (fact_fts.len, fts_totals, fts_terms: a trigger keeps them, as FTS5 keeps
its own). ts_rank_cd alone knows no term rarity: on LoCoMo its keyword arm found 0.44 of the
gold in the top 10 against 0.74 for BM25 (bench/RESULTS.md). The score handed back is minus
BM25, lower-is-better as bm25() is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memcli.store.postgres.core import PgCore
from memcli.store.postgres.schema import TEXT_CONFIG
from memcli.store.postgres.sql import filter_active, filter_sql, query_sql, rank_weights
from memcli.store.types import iso

# FTS5's bm25() constants.
BM25_K1 = 1.2
BM25_B = 0.75
IDF_FLOOR = 1e-6


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


# For each term (its phraseto_tsquery text): how many rows of the index hold it (a word's
# count is kept beside the index, fts_terms; a phrase's is counted on the GIN index; NULL for
# a term that indexes to nothing), and the index's rows and tokens (fts_totals).
HOLDING_SQL = f"""
SELECT u.t,
  (SELECT CASE WHEN cardinality(s.a) = 1
            THEN coalesce((SELECT docs FROM fts_terms WHERE lexeme = s.a[1]), 0)
          WHEN cardinality(s.a) > 1
            THEN (SELECT count(*) FROM fact_fts WHERE doc @@ phraseto_tsquery('{TEXT_CONFIG}', u.t))
          END
   FROM (SELECT tsvector_to_array(to_tsvector('{TEXT_CONFIG}', u.t)) AS a) s),
  t.docs, t.tokens
FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n), fts_totals t ORDER BY u.n
"""


class PgSearch:
    def __init__(self, core: PgCore) -> None:
        self.core = core
        self.conn = core.conn

    def _term_rarity(self, terms: Sequence[str]) -> tuple[list[tuple[str, float]], float]:
        """For the terms that index to something (a stop word alone does not): (the term's
        phraseto_tsquery text, its IDF), and the index's average fact length. One statement
        for all of them (a round trip each was most of the arm's time on a busy machine)."""
        texts = [query_sql([t])[1][0] for t in terms]  # type: ignore[index]
        rows = self.conn.execute(HOLDING_SQL, (texts,)).fetchall()
        out = []
        for text, hits, docs, _ in rows:
            if hits is not None:
                idf = math.log((docs - hits + 0.5) / (hits + 0.5)) if docs else 0.0
                out.append((text, max(idf, IDF_FLOOR)))
        docs, tokens = (rows[0][2], rows[0][3]) if rows else (0, 0)
        return out, (tokens / docs if docs else 1.0)

    def keyword_search(
        self,
        bank_id: int,
        terms: Sequence[str],
        column_weights: Sequence[float],
        flt: Any,
        limit: int,
    ) -> list[tuple[int, float]]:
        """(fact id, minus BM25) best first for the bank's facts holding any of the terms."""
        if not terms or limit <= 0:
            return []
        rated, avgdl = self._term_rarity(list(terms))
        if not rated:
            return []
        weights = rank_weights(column_weights)
        # The weights as ts_rank_cd takes them are scaled into (0, 1]: scaled back, each
        # occurrence counts its column's weight, as in FTS5.
        scale = max(float(w) for w in column_weights)
        queries = ", ".join(
            f"phraseto_tsquery('{TEXT_CONFIG}', %s) AS q{i}" for i in range(len(rated))
        )
        norm = f"{BM25_K1} * (1 - {BM25_B} + {BM25_B} * x.len / %s::float8)"
        parts = []
        for i in range(len(rated)):
            f = f"({scale}::float8 * ts_rank_cd(%s::float4[], x.doc, q.q{i}, 0))"
            parts.append(f"%s::float8 * {f} * {BM25_K1 + 1} / ({f} + {norm})")
        params_score: list[Any] = []
        for _, idf in rated:
            params_score += [idf, weights, weights, avgdl]
        matched = " || ".join(f"q.q{i}" for i in range(len(rated)))
        cond, params = filter_sql(flt, "f")
        rows = self.conn.execute(
            f"WITH q AS (SELECT {queries}) "
            f"SELECT x.fact_id, {' + '.join(parts)} AS s FROM q, fact_fts x "
            f"JOIN facts f ON f.id = x.fact_id WHERE x.doc @@ ({matched}) AND f.bank_id = %s{cond} "
            "ORDER BY s DESC, x.fact_id LIMIT %s",
            ([t for t, _ in rated] + params_score + [bank_id, *params, limit]),
        ).fetchall()
        return [(fid, -float(score)) for fid, score in rows]

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

    def own_words_match_all(self, fact_ids: Sequence[int], terms: Sequence[str]) -> set[int]:
        left = set(fact_ids)
        for term in terms:
            if not left:
                break
            left &= self.own_words_match(list(left), [term])
        return left if terms else set()

    def keyword_match_count(self, term: str) -> int:
        """How many facts (of any bank) hold a search term."""
        built = query_sql([term])
        return (self._rows_holding(built[1][0]) or 0) if built else 0

    def _rows_holding(self, text: str) -> int | None:
        """How many rows of the index hold a term (its phraseto_tsquery text); None for a
        term that indexes to nothing (stop words only)."""
        return self.conn.execute(HOLDING_SQL, ([text],)).fetchone()[1]

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
