"""Keyword arm: FTS5 BM25 over fact text, context (who said it) and entity names.

Terms are ranked by relevance before the LIMIT (never by recency), and the query reaches FTS5
only as the terms of fts.query_terms, which the store quotes, so its punctuation and
operators are plain words.
"""

from __future__ import annotations

from memcli import fts
from memcli.recall.types import ArmContext, ArmHit, ArmResult

# Column weights for bm25(): the fact text counts most; speaker, entity names and the lead-in
# (what was said just before) help.
COLUMN_WEIGHTS = (1.0, 0.5, 0.75, 0.3)


def select_terms(ctx: ArmContext, terms: list[str]) -> list[str]:
    """At most keyword_max_terms terms, keeping the rarest (fewest matching facts) of those
    some fact holds: a term no fact holds ranks nothing, yet counted as the rarest it pushed
    out the words that matched (a long query of unknown words found nothing)."""
    cap = ctx.settings.keyword_max_terms
    if len(terms) <= cap:
        return terms
    counts = {}
    for term in terms:
        counts[term] = ctx.store.search.keyword_match_count(term)
    keep = set(sorted(terms, key=lambda t: (counts[t] == 0, counts[t], terms.index(t)))[:cap])
    return [t for t in terms if t in keep]


def drop_common_characters(ctx: ArmContext, terms: list[str]) -> list[str]:
    """Without the single CJK characters that more than keyword_cjk_char_max_share of all
    facts contain (的, 我, 이...), once that is more than keyword_cjk_char_min_count facts:
    they rank almost nothing, and BM25 walks their whole posting list (on 100k synthetic CJK
    facts a query costs ~40-100 ms with characters and pairs, ~10-15 ms with pairs only)."""
    s = ctx.settings
    singles = [t for t in terms if len(t) == 1 and fts.is_cjk(t)]
    if not singles or s.keyword_cjk_char_max_share >= 1.0:
        return terms
    limit = max(
        s.keyword_cjk_char_max_share * ctx.store.facts.fact_count(), s.keyword_cjk_char_min_count
    )
    common = {t for t in singles if ctx.store.search.keyword_match_count(t) > limit}
    return [t for t in terms if t not in common]


def run(ctx: ArmContext) -> ArmResult:
    terms = fts.query_terms(ctx.query, ctx.settings.keyword_cjk_terms)
    terms = select_terms(ctx, drop_common_characters(ctx, terms))
    result = ArmResult("keyword", [], "bm25", notes={"terms": terms})
    if not terms:
        return result
    rows = ctx.store.search.keyword_search(
        ctx.bank_id, terms, COLUMN_WEIGHTS, ctx.filters, ctx.limit
    )
    # bm25() is lower-is-better; report it as a positive relevance.
    result.hits = [ArmHit(fact_id, -score) for fact_id, score in rows]
    return result
