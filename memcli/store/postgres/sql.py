"""SQL pieces the PostgreSQL parts share: fact filters and selections as conditions with
bound parameters (never user text in the SQL), the fact columns, and the keyword query."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from memcli import fts
from memcli.store.postgres.schema import TEXT_CONFIG
from memcli.store.types import iso

FACT_COLUMNS = (
    "f.id, f.text, f.context, f.fact_type, f.mentioned_at, f.occurred_start, f.occurred_end, "
    "f.tags, f.metadata, f.proof_count, f.source_id, d.external_id, f.chunk_id, "
    "f.valid_from, f.invalid_at, f.superseded_by, f.created_at, f.tail_tokens"
)


def filter_sql(flt: Any, alias: str = "f") -> tuple[str, list]:
    """A condition (starting with AND, or empty) and its parameters: the rules of the SQLite
    store's filter_sql (store/search.py), in PostgreSQL."""
    if flt is None:
        return "", []
    parts: list[str] = []
    params: list = []
    if flt.types:
        parts.append(f"{alias}.fact_type = ANY(%s)")
        params.append(list(flt.types))
    as_of = getattr(flt, "as_of", None)
    if as_of is None and getattr(flt, "valid_only", False):
        parts.append(f"{alias}.invalid_at IS NULL")
    elif as_of is not None:
        parts.append(
            f"{alias}.created_at <= %s AND ({alias}.invalid_at IS NULL OR {alias}.invalid_at > %s)"
        )
        params.extend([iso(as_of), iso(as_of)])
    if flt.tags:
        tags = sorted(set(flt.tags))
        untagged = f"NOT EXISTS (SELECT 1 FROM fact_tags t WHERE t.fact_id = {alias}.id)"
        matched = (
            f"(SELECT count(DISTINCT t.tag) FROM fact_tags t "
            f"WHERE t.fact_id = {alias}.id AND t.tag = ANY(%s))"
        )
        total = f"(SELECT count(*) FROM fact_tags t WHERE t.fact_id = {alias}.id)"
        mode = flt.tags_match
        n = len(tags)
        if mode == "any":
            parts.append(f"({untagged} OR {matched} > 0)")
        elif mode == "all":
            parts.append(f"({untagged} OR {matched} = {n})")
        elif mode == "any_strict":
            parts.append(f"{matched} > 0")
        elif mode == "all_strict":
            parts.append(f"{matched} = {n}")
        elif mode == "exact":
            parts.append(f"({matched} = {n} AND {total} = {n})")
        else:
            raise ValueError(f"unknown tags match mode {mode!r}")
        # One parameter per use (the condition may name the list twice).
        params.extend([tags] * parts[-1].count("%s"))
    if not parts:
        return "", []
    return " AND " + " AND ".join(parts), params


def filter_active(flt: Any) -> bool:
    return flt is not None and bool(
        flt.types or flt.tags or getattr(flt, "valid_only", False) or getattr(flt, "as_of", None)
    )


def selection_sql(sel: Any, alias: str = "f") -> tuple[str, list]:
    """The condition (starting with AND, or empty) that a selection (list, forget) puts on
    facts."""
    parts: list[str] = []
    params: list = []
    if getattr(sel, "ids", None):
        parts.append(f"{alias}.id = ANY(%s)")
        params.append([int(i) for i in sel.ids])
    if getattr(sel, "document", None) is not None:
        parts.append(
            f"{alias}.document_id = (SELECT d.id FROM documents d "
            f"WHERE d.bank_id = {alias}.bank_id AND d.external_id = %s)"
        )
        params.append(sel.document)
    if getattr(sel, "source_id", None) is not None:
        parts.append(f"{alias}.source_id = %s")
        params.append(sel.source_id)
    if getattr(sel, "context", None) is not None:
        parts.append(f"lower({alias}.context) = lower(%s)")
        params.append(sel.context)
    if getattr(sel, "since", None) is not None:
        parts.append(f"{alias}.mentioned_at >= %s")
        params.append(iso(sel.since))
    if getattr(sel, "until", None) is not None:
        parts.append(f"{alias}.mentioned_at < %s")
        params.append(iso(sel.until))
    cond = (" AND " + " AND ".join(parts)) if parts else ""
    more, more_params = filter_sql(sel, alias)
    return cond + more, params + more_params


# -- keyword search ----------------------------------------------------------------------


def _is_latin(ch: str) -> bool:
    code = ord(ch)
    return code < 0x250 or 0x1E00 <= code <= 0x1EFF


def fold(text: str) -> str:
    """Latin letters without their diacritics (café -> cafe), as SQLite's unicode61 tokenizer
    with remove_diacritics 2 indexes them: PostgreSQL's text search keeps accents (and the
    unaccent extension may not be there). Other scripts are left as they are (kana's voicing
    marks are not diacritics)."""
    if text.isascii():
        return text
    out = []
    for ch in text:
        if ch.isascii() or not _is_latin(ch):
            out.append(ch)
            continue
        out.append(
            "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
        )
    return "".join(out)


def document_sql() -> str:
    """The tsvector of a fact's four indexed texts, from four parameters (each folded)."""
    c = TEXT_CONFIG
    return (
        f"setweight(to_tsvector('{c}', %s), 'A') || setweight(to_tsvector('{c}', %s), 'B') || "
        f"setweight(to_tsvector('{c}', %s), 'C') || setweight(to_tsvector('{c}', %s), 'D')"
    )


def document_params(text: str, context: str, entities: str, lead_in: str) -> list[str]:
    return [fold(text), fold(context), fold(entities), fold(lead_in)]


_TOKEN = re.compile(r"[^\W_]+")


def document_length(*texts: str) -> int:
    """Tokens in a fact's indexed texts, as FTS5's unicode61 tokenizer counts them (runs of
    letters and digits; CJK characters are apart already): BM25's document length."""
    return sum(len(_TOKEN.findall(t)) for t in texts)


def query_sql(terms: Sequence[str]) -> tuple[str, list[str]] | None:
    """A tsquery matching any of the search terms (fts.query_terms), each a bound parameter
    to phraseto_tsquery: a word, or a CJK run as the phrase of its characters (they are
    indexed apart, fts.index_text). None when there are no terms."""
    if not terms:
        return None
    parts = [f"phraseto_tsquery('{TEXT_CONFIG}', %s)" for _ in terms]
    params = [fold(" ".join(t) if fts.is_cjk(t) else t) for t in terms]
    return "(" + " || ".join(parts) + ")", params


def rank_weights(column_weights: Sequence[float]) -> list[float]:
    """ts_rank_cd's weights {D, C, B, A} from the arm's (text, context, entities, lead-in),
    scaled into (0, 1] as PostgreSQL requires."""
    text, context, entities, lead_in = (float(w) for w in column_weights)
    top = max(text, context, entities, lead_in, 1e-9)
    return [lead_in / top, entities / top, context / top, text / top]
