"""Fusion of the arms' ranked lists into one candidate list.

RRF (always computed, shown in the trace and JSON): score(d) = sum over arms of
1 / (k + rank / weight), ranks from 1.

The order, though, comes from `settings.fusion`:
- "rrf": by the RRF score (the reference design);
- "scores" (default): a weighted mean of each arm's own scores, min-max normalised within the
  arm's list. RRF throws away how far apart the scores are: BM25's clear winner and the
  50th hit of a flat cosine list count alike. Measured on LoCoMo with MiniLM + BM25, score
  fusion gains ~3 points of R@10 and ~4 of MRR over RRF (bench/RESULTS.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from memcli import fts, lang
from memcli.recall.types import ARMS, ArmResult, Candidate

# Arms whose lists come from the query's embedding (the graph expands the semantic hits).
VECTOR_ARMS = ("semantic", "graph", "document")
# RecallSettings.fusion: what orders the candidates.
FUSION_METHODS = ("scores", "rrf")


def query_weights(
    weights: Mapping[str, float],
    query: str,
    rules: Any,
    settings: Any,
    time_share: float = 0.0,
) -> tuple[dict[str, float], str | None]:
    """The arm weights for this query, and why they differ from the defaults (None if not).

    `time_share` (t, from time_share()): the share of the query's search terms that name
    its time window. "What did I do yesterday?" is all time (t = 1): it asks for that day's
    memories, which only the temporal arm holds (the other arms match its few other words in
    any memory). So the temporal arm weighs w + t (W - w), W =
    settings.time_query_temporal_weight; a question that only mentions a time among its
    topic words (t small) keeps nearly the default weight.

    An arm known to be weak for the query weighs less, in proportion to the query's share of
    CJK letters s, so fusion does not fall below its best arm:
    - an English-only embedder (rules.english_only) on CJK: its vectors are near noise, the
      vector arms get x (1 - s (1 - cjk_weak_embedder_factor));
    - a multilingual embedder on CJK: the vectors are the strong signal and character n-gram
      keywords the weaker one, the keyword arm gets x (1 - s (1 - cjk_keyword_factor)).
    An embedder whose languages are unknown changes nothing; nor does a query without CJK.
    """
    out = {name: float(weights.get(name, 1.0)) for name in ARMS}
    notes = []
    if time_share > 0 and out["temporal"] < settings.time_query_temporal_weight:
        before = out["temporal"]
        out["temporal"] += time_share * (settings.time_query_temporal_weight - before)
        notes.append(
            f"time words are {time_share:.0%} of the query's terms: temporal "
            f"{before:.2f} -> {out['temporal']:.2f}"
        )
    share = lang.cjk_share(query)
    if share == 0.0 or rules is None or rules.languages is None:
        return out, "; ".join(notes) or None
    if rules.english_only:
        factor = 1.0 - share * (1.0 - settings.cjk_weak_embedder_factor)
        for name in VECTOR_ARMS:
            out[name] *= factor
        notes.append(f"English-only embedder, {share:.0%} CJK query: vector arms x{factor:.2f}")
    else:
        factor = 1.0 - share * (1.0 - settings.cjk_keyword_factor)
        out["keyword"] *= factor
        notes.append(f"multilingual embedder, {share:.0%} CJK query: keyword x{factor:.2f}")
    return out, "; ".join(notes)


def time_share(query: str, where: tuple[int, int] | None, cjk_terms: str) -> float:
    """The share of the query's search terms that lie in query[where] (its time words):
    1 - terms of the rest / terms of the whole, so "yesterday's" counts as a time word."""
    if where is None:
        return 0.0
    terms = fts.query_terms(query, cjk_terms)
    if not terms:
        return 0.0
    start, end = where
    rest = fts.query_terms(f"{query[:start]} {query[end:]}", cjk_terms)
    return max(0.0, 1.0 - len(rest) / len(terms))


def _gather(arms: Mapping[str, ArmResult], k: int, weights: Mapping[str, float]) -> list[Candidate]:
    """Every fact some arm found, with its rank and score in each and its RRF score, in the
    order first found."""
    fused: dict[int, Candidate] = {}
    for name, arm in arms.items():
        weight = weights.get(name, 1.0)
        for rank, hit in enumerate(arm.hits, start=1):
            cand = fused.get(hit.fact_id)
            if cand is None:
                cand = fused[hit.fact_id] = Candidate(hit.fact_id, dict.fromkeys(ARMS), {})
            cand.ranks[name] = rank
            cand.arm_scores[name] = hit.score
            cand.rrf += 1.0 / (k + rank / weight)
    return list(fused.values())


def rrf(
    arms: Mapping[str, ArmResult], k: int = 60, weights: Mapping[str, float] | None = None
) -> list[Candidate]:
    """Fuse ranked arm lists by RRF into candidates, best first (ties: lower fact id)."""
    candidates = _gather(arms, k, weights or {})
    for cand in candidates:
        cand.fused = cand.rrf
    return in_fusion_order(candidates)


def min_max(arm: ArmResult) -> dict[int, float]:
    """Each hit's score scaled to [0, 1] within its arm's list (all 1.0 if the list is flat),
    from the arm's score floor when it has one, else from its lowest hit."""
    if not arm.hits:
        return {}
    top = max(h.score for h in arm.hits)
    low = min(h.score for h in arm.hits)
    if arm.score_floor is not None:
        low = min(low, arm.score_floor)
    if top <= low:
        return {h.fact_id: 1.0 for h in arm.hits}
    return {h.fact_id: (h.score - low) / (top - low) for h in arm.hits}


def score_fusion(
    candidates: list[Candidate], arms: Mapping[str, ArmResult], weights: Mapping[str, float]
) -> list[Candidate]:
    """Order candidates by sum over arms of weight x min-max score / sum of the weights of
    the arms that ran (an arm that missed a fact adds 0 for it)."""
    total = sum(weights.get(name, 1.0) for name in arms) or 1.0
    by_id = {cand.fact_id: cand for cand in candidates}
    sums = dict.fromkeys(by_id, 0.0)
    # Arm by arm, in the arms' order: the same sum, term for term, as adding each arm's
    # weighted score (0 where it missed the fact) per candidate.
    for name, arm in arms.items():
        weight = weights.get(name, 1.0)
        for fact_id, scaled in min_max(arm).items():
            if fact_id in sums:
                sums[fact_id] += weight * scaled
    for fact_id, cand in by_id.items():
        cand.fused = sums[fact_id] / total
    return in_fusion_order(candidates)


def fuse(
    arms: Mapping[str, ArmResult],
    method: str,
    k: int,
    rrf_weights: Mapping[str, float],
    score_weights: Mapping[str, float],
) -> list[Candidate]:
    if method == "scores":
        return score_fusion(_gather(arms, k, rrf_weights), arms, score_weights)
    if method not in FUSION_METHODS:
        raise ValueError(f"unknown fusion {method!r} (use rrf or scores)")
    return rrf(arms, k, rrf_weights)


def in_fusion_order(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Candidates by fusion score (ties: RRF, then lower fact id), rrf_rank set to match."""
    ordered = sorted(candidates, key=lambda c: (-c.fused, -c.rrf, c.fact_id))
    for i, cand in enumerate(ordered, start=1):
        cand.rrf_rank = i
    return ordered
