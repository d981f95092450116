"""The relevance floor: knowing when nothing is relevant.

Every base score recall orders by is relative (a fusion score as a share of the best one), so
the top candidate of a question about something never said scores like the top candidate of
a good question. The floor asks an absolute question of each candidate instead: is it close
enough to the query to count as about it? A candidate passes when

- its cosine to the query (the best of its own vector's and its sentences', as the semantic arm
  scores it) reaches the embedder's calibrated floor (COSINE_FLOORS,
  measured per model on the dev sets: bench/RESULTS.md), or
- its own words (text, speaker, entity names) hold at least KEYWORD_COVERAGE of the query's
  search terms, which keeps an exact match the embedder cannot see (a code, a rare name), or
- the query asks about a time and the temporal arm found it in that time ("what did I do on
  March 10?" is answered by that day's facts, whatever they say).

Its relevance is the larger of the two as a share of its floor, so 1.0 is the floor itself
and `passes` is relevance >= 1. A question none of whose candidates passes gets no memories
(an agent then says it does not know, instead of answering from the least bad ones). Once
one passes, the others are shown down to the item floor, a share of it (floor_item_share):
the best candidate of a question about something said lies well above the cosines of its
other relevant memories, so one floor for both had to choose between showing a good
question's near misses and emptying a question about nothing. A model's calibration gives
both levels; `--min-score` replaces the floor.

A multilingual model's cosines between two scripts (an English question, Chinese notes) run
lower than within one, so such a pair is held to a floor of its own (CROSS_SCRIPT_FLOORS).

A model whose floor is not known (a GGUF the user brought) has none: its cosines are on a
scale nobody measured.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memcli import fts, lang
from memcli.recall.types import Candidate

# Cosine floors per model (its own name, GGUF general.name): (question, item), calibrated on
# the dev sets (bench/calibrate_floor.py --gates, bench/RESULTS.md). The item floor alone
# would show at least 98% of every dev set's answerable questions' best gold items (a point
# of margin over the 97% asked, for data not seen). The question floor: the highest at which
# no set keeps fewer of them than the one-level floor of 0.366 did (0.41, once candidates in
# another script have their own floor), less 0.01 for data not seen; it empties more of the
# questions about nothing a store holds (the other English dev set's, asked of it). With
# sentence vectors a fact's cosine is its best sentence's: the same rule, against the 0.40
# floor's keep on facts' own vectors, gives 0.42 (0.43 loses a CJK question), so 0.41.
COSINE_FLOORS: dict[str, tuple[float, float]] = {"multilingual-e5-small": (0.41, 0.32)}
# The question floor between a query and a memory in different scripts (one mostly CJK, the
# other not: an English question about Chinese notes), per model; its item floor is the same
# share of it. A multilingual model puts a question and its answer in two languages further
# apart than in one (e5 on the CJK dev sets' 22 English questions: best gold cosines
# 0.14-0.65, median 0.38, against 0.53 within a language), and the same-script floor emptied
# 10 of those 22. Calibrated on them (bench/calibrate_floor.py --cross-script): the highest
# floor all of them but one pass; it still empties 68% of 160 questions about nothing held
# asked across scripts (LoCoMo's and LongMemEval's of the CJK stores and back).
CROSS_SCRIPT_FLOORS: dict[str, float] = {"multilingual-e5-small": 0.31}
# Share of the query's search terms a candidate's own words must hold to pass on words alone.
KEYWORD_COVERAGE = 1.0
# Candidates checked at most (in final order): far more than a 4096-token budget holds.
CHECKED = 200


@dataclass(frozen=True)
class Floor:
    """The floor a recall applied: the cosine floor of its embedder and the share of query
    terms that passes on words alone."""

    cosine: float
    keyword: float
    # Once one candidate passes, the others shown down to this share of the floor.
    item_share: float = 1.0
    # The cosine floor for a candidate in another script than the query's (None: `cosine`).
    cross_script: float | None = None

    def shows(self, relevance: float | None) -> bool:
        """Whether a candidate of this relevance is shown, once its question has passed."""
        return relevance is not None and relevance >= self.item_share

    def to_json(self) -> dict[str, float]:
        out = {"cosine": self.cosine, "keyword": self.keyword}
        if self.item_share < 1.0:
            out["item_share"] = round(self.item_share, 4)
        if self.cross_script is not None:
            out["cross_script"] = self.cross_script
        return out

    def cosine_for(self, query_writing: str | None, text: str) -> float:
        """The cosine floor of a candidate of this text for a query written so
        (lang.writing). A text with no letters ("12:30", emoji) is in no script: the
        same-script floor."""
        if self.cross_script is None or not lang.in_other_script(query_writing, text):
            return self.cosine
        return self.cross_script

    def cosines_for(self, query: str, texts: Sequence[str | None]) -> list[float]:
        """cosine_for of each text (None: a candidate without its fact) for this query. A
        query in no CJK over texts none of which holds a CJK letter (most banks) is decided
        by one search of them all."""
        query_writing = lang.writing(query) if self.cross_script is not None else None
        if query_writing is None or (
            query_writing == "other" and not lang.has_cjk("\n".join(t or "" for t in texts))
        ):
            return [self.cosine] * len(texts)
        return [self.cosine if t is None else self.cosine_for(query_writing, t) for t in texts]


def floor_for(model: Any, settings: Any) -> Floor | None:
    """The floor for this embedder: the settings when given (floor_cosine alone is one
    level), else the calibrated levels of the model, else none (an unknown model's cosines
    are on an unmeasured scale)."""
    cosine, share = settings.floor_cosine, settings.floor_item_share
    cross = None  # a floor given is the floor for every candidate
    if cosine is None:
        name = getattr(model, "name", None)
        calibrated = COSINE_FLOORS.get(name) if name else None
        if calibrated is None:
            return None
        cosine, item = calibrated
        if share is None:
            share = item / cosine
        cross = CROSS_SCRIPT_FLOORS.get(name)
    return Floor(
        float(cosine),
        float(settings.floor_keyword_coverage),
        float(share) if share is not None else 1.0,
        cross,
    )


def apply(
    store: Any,
    bank_id: int,
    query: str,
    query_vec: Any,
    ranked: Sequence[Candidate],
    floor: Floor,
    cjk_terms: str = "both",
    timely: Collection[int] = (),
) -> list[Candidate]:
    """Set each checked candidate's relevance and return those that pass, in order. timely:
    the facts of the time a question asks about (the temporal arm's), which pass."""
    head = list(ranked[:CHECKED])
    if not head:
        return []
    cosines = fact_cosines(store, bank_id, [c.fact_id for c in head], query_vec)
    levels = floor.cosines_for(query, [c.fact.text if c.fact is not None else None for c in head])
    for c, cos, level in zip(head, cosines, levels):
        c.relevance = float(cos) / level if level > 0 else float("inf")
    for c in head:
        if c.fact_id in timely:
            c.relevance = max(c.relevance, 1.0)
    failing = [c for c in head if c.relevance < 1.0]
    if failing and floor.keyword >= 1.0:
        # Every term or nothing: one search of all of them (no per-term shares needed).
        terms = list(dict.fromkeys(fts.query_terms(query, cjk_terms)))
        ids = [c.fact_id for c in failing]
        holding = store.search.own_words_match_all(ids, terms) if floor.keyword == 1.0 else set()
        for c in failing:
            if c.fact_id in holding:
                c.relevance = 1.0
    elif failing:
        coverage = term_coverage(store, query, [c.fact_id for c in failing], cjk_terms)
        for c in failing:
            share = coverage.get(c.fact_id, 0.0)
            if floor.keyword > 0:
                c.relevance = max(c.relevance, share / floor.keyword)
    if not any(c.relevance >= 1.0 for c in head):
        return []
    return [c for c in head if floor.shows(c.relevance)]


def fact_cosines(store: Any, bank_id: int, fact_ids: Sequence[int], query_vec: Any) -> np.ndarray:
    """Each fact's cosine to the query, as the semantic arm scores it: the best of its own
    vector's and its sentences' (a turn that also tells of something else is as near the
    question as the sentence that answers it). Zeros without a query vector or vectors."""
    out = np.zeros(len(fact_ids), dtype=np.float32)
    if query_vec is None or not len(fact_ids):
        return out
    vectors = store.vectors.fact_vectors(bank_id, fact_ids)
    if vectors is None:
        return out
    query = np.asarray(query_vec, dtype=np.float32)
    out = (vectors @ query).astype(np.float32)
    sentences = store.vectors.sentence_vectors(fact_ids)
    for i, fact_id in enumerate(fact_ids):
        if fact_id in sentences:
            out[i] = max(out[i], float((sentences[fact_id] @ query).max()))
    return out


def term_coverage(
    store: Any, query: str, fact_ids: Sequence[int], cjk_terms: str = "both"
) -> dict[int, float]:
    """For each fact, the share of the query's search terms (fts.query_terms: stop words
    dropped, CJK as characters and pairs) that its own words hold."""
    terms = list(dict.fromkeys(fts.query_terms(query, cjk_terms)))
    if not terms or not fact_ids:
        return {}
    counts = dict.fromkeys(fact_ids, 0)
    for term in terms:
        for fid in store.search.own_words_match(list(fact_ids), [term]):
            counts[fid] += 1
    return {fid: n / len(terms) for fid, n in counts.items()}
