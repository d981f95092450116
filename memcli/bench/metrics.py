"""Pure retrieval metrics for ``mem bench``, over ranked lists of item ids.

Everything here is a plain function of ids and sets so the numbers in a report can be checked by
hand. Conventions shared by every function:

* ``ranked`` is best-first. Recall can map several facts to the same item id, so every function
  first applies :func:`dedupe_ranked` (the first occurrence keeps its rank); a repeated id can
  therefore neither push gold out of the top k nor count twice.
* ``gold`` is a non-empty set of ids. Scores over empty gold are undefined, and a silent 0 or 1
  would skew the means, so these functions raise ValueError: the runner must skip and count
  such questions.
* ``k`` is a positive cut-off; ranks are 1-based in the formulas.

Metric names used in per-question dicts (and therefore in the report):
``candidateRecall``, ``recall@k``, ``rankingLoss@k``, ``budgetLoss@k``, ``hitAny@k``,
``recall_all@k``, ``MRR``, ``nDCG@k``, ``checklistCoverage``, ``distractorRate``, and for arms
``uniqueRecall``.
"""

from __future__ import annotations

import math
import re
import statistics
import unicodedata
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

__all__ = [
    "Aggregator",
    "CHECKLIST_THRESHOLD",
    "arm_contributions",
    "budget_loss",
    "candidate_recall",
    "checklist_coverage",
    "content_words",
    "dedupe_ranked",
    "distractor_rate",
    "hit_any_at_k",
    "map_ranked",
    "ndcg_at_k",
    "p50",
    "p95",
    "percentile_nearest_rank",
    "question_metrics",
    "recall_all_at_k",
    "recall_at_k",
    "reciprocal_rank",
]

T = TypeVar("T", bound=Hashable)

#: Share of a checklist point's content words that must appear for the point to count as covered.
CHECKLIST_THRESHOLD = 0.8


# --------------------------------------------------------------------------------------------
# Ranked-list helpers
# --------------------------------------------------------------------------------------------


def dedupe_ranked(ids: Iterable[T]) -> list[T]:
    """Drop repeats from a best-first list, keeping each id at its first (best) rank.

    Several retrieved facts can belong to one item; scoring the raw list would let one item
    take several of the k slots or count as gold twice.
    """
    seen: set[T] = set()
    out: list[T] = []
    for ident in ids:
        if ident not in seen:
            seen.add(ident)
            out.append(ident)
    return out


def map_ranked(ranked: Iterable[Hashable], mapping: Mapping[Any, T]) -> list[T]:
    """Map a ranked item list to a ranked list of groups (e.g. sessions), deduplicated.

    Session-level scores (LongMemEval) rank a session at the rank of its best item. Ids missing
    from ``mapping`` or mapped to None are dropped.
    """
    return dedupe_ranked(g for i in ranked if (g := mapping.get(i)) is not None)


def _check(gold: Iterable[Hashable], k: int | None = None) -> set[Hashable]:
    """Validate shared arguments once so every metric fails the same way."""
    gold = set(gold)
    if not gold:
        raise ValueError("gold is empty: skip this question instead of scoring it")
    if k is not None and k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return gold


def _top(ranked: Iterable[Hashable], k: int) -> list[Hashable]:
    return dedupe_ranked(ranked)[:k]


# --------------------------------------------------------------------------------------------
# Ranking metrics
# --------------------------------------------------------------------------------------------


def recall_at_k(ranked: Iterable[Hashable], gold: Iterable[Hashable], k: int) -> float:
    """Fraction of gold in the top k: ``|gold ∩ top_k| / |gold|``.

    The headline number: how much of what the question needs reaches the reader.
    """
    gold = _check(gold, k)
    return len(gold.intersection(_top(ranked, k))) / len(gold)


def hit_any_at_k(ranked: Iterable[Hashable], gold: Iterable[Hashable], k: int) -> float:
    """1.0 if at least one gold id is in the top k, else 0.0 (LongMemEval's recall_any@k).

    Single-fact questions are answered by any one gold turn, so this is their natural score.
    """
    gold = _check(gold, k)
    return 1.0 if gold.intersection(_top(ranked, k)) else 0.0


def recall_all_at_k(ranked: Iterable[Hashable], gold: Iterable[Hashable], k: int) -> float:
    """1.0 if every gold id is in the top k, else 0.0 (LongMemEval's recall_all@k).

    Multi-hop questions need all their evidence; partial recall can hide that none is complete.
    """
    gold = _check(gold, k)
    return 1.0 if gold.issubset(_top(ranked, k)) else 0.0


def reciprocal_rank(
    ranked: Iterable[Hashable], gold: Iterable[Hashable], k: int | None = None
) -> float:
    """``1 / rank`` of the first gold id (1-based), 0.0 if none (within the top k if given).

    Averaged over questions this is MRR: it rewards putting *some* gold first, which is what a
    reader that trusts the top of the context needs.
    """
    gold = _check(gold, k)
    ranked = dedupe_ranked(ranked)
    if k is not None:
        ranked = ranked[:k]
    for rank, ident in enumerate(ranked, start=1):
        if ident in gold:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranked: Iterable[Hashable], gold: Iterable[Hashable], k: int) -> float:
    """Normalised DCG with binary relevance.

    ``DCG = sum over ranks i <= k with a gold id of 1 / log2(i + 1)``;
    ``IDCG = sum_{i=1..min(k, |gold|)} 1 / log2(i + 1)`` (all gold packed at the top);
    ``nDCG = DCG / IDCG``. Unlike recall@k it prefers gold near the top of the k.
    """
    gold = _check(gold, k)
    dcg = sum(
        1.0 / math.log2(rank + 1)
        for rank, ident in enumerate(_top(ranked, k), start=1)
        if ident in gold
    )
    idcg = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(k, len(gold)) + 1))
    return dcg / idcg


# --------------------------------------------------------------------------------------------
# Pipeline-loss metrics
# --------------------------------------------------------------------------------------------


def candidate_recall(candidate_ids: Iterable[Hashable], gold: Iterable[Hashable]) -> float:
    """Fraction of gold found by any arm before fusion: ``|gold ∩ candidates| / |gold|``.

    The ceiling for everything after retrieval; ``candidateRecall - recall@k`` is the
    ranking loss, i.e. gold that was found but fused/reranked out of the top k.
    """
    gold = _check(gold)
    return len(gold.intersection(candidate_ids)) / len(gold)


def budget_loss(
    ranked: Iterable[Hashable],
    kept_ids: Iterable[Hashable],
    gold: Iterable[Hashable],
    k: int,
) -> float:
    """Fraction of gold ranked into the top k but cut by the token budget.

    ``|{g in gold : g in top_k(ranked) and g not in kept}| / |gold|``, where ``kept_ids`` is
    what the budgeted output actually contained. Separates "ranked well but did not fit" from
    ranking loss.
    """
    gold = _check(gold, k)
    kept = set(kept_ids)
    return len({g for g in _top(ranked, k) if g in gold and g not in kept}) / len(gold)


def arm_contributions(
    arm_candidates: Mapping[str, Iterable[Hashable]], gold: Iterable[Hashable]
) -> dict[str, dict[str, float]]:
    """Per arm: the share of gold it found and the share of gold only it found.

    ``candidateRecall[arm] = |gold ∩ C_arm| / |gold|`` and
    ``uniqueRecall[arm] = |gold ∩ C_arm minus the union of the other arms' C| / |gold|``.
    An arm with high candidateRecall but zero uniqueRecall is redundant on this data; the
    union over arms gives :func:`candidate_recall`.
    """
    gold = _check(gold)
    found = {arm: gold.intersection(ids) for arm, ids in arm_candidates.items()}
    out: dict[str, dict[str, float]] = {}
    for arm, mine in found.items():
        others: set[Hashable] = set()
        for other, theirs in found.items():
            if other != arm:
                others |= theirs
        out[arm] = {
            "candidateRecall": len(mine) / len(gold),
            "uniqueRecall": len(mine - others) / len(gold),
        }
    return out


# --------------------------------------------------------------------------------------------
# Content metrics
# --------------------------------------------------------------------------------------------

_STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    """.split()
)
_WORD = re.compile(r"[^\W_]+")


def content_words(text: str) -> set[str]:
    """Normalised content words of ``text``, as used by :func:`checklist_coverage`.

    Rule: Unicode NFKC + casefold; apostrophes removed so "Alice's" -> "alices"; words are runs
    of letters/digits; English stopwords dropped; a trailing "s" is stripped from words longer
    than 3 letters not ending in "ss" (so "dogs"/"dog" and "alices"/"alice" match). Crude on
    purpose: it only has to decide whether a fact's words made it into the context.
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    text = text.replace("'", "").replace("\u2019", "")
    words: set[str] = set()
    for word in _WORD.findall(text):
        if word in _STOPWORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.add(word)
    return words


def checklist_coverage(
    texts_returned: Iterable[str],
    checklist: Sequence[str],
    threshold: float = CHECKLIST_THRESHOLD,
) -> float:
    """Fraction of checklist points covered by the returned texts.

    A point is covered when at least ``threshold`` (default 80%) of its :func:`content_words`
    appear among the content words of all returned texts together:
    ``matched / |words(point)| >= threshold``. With 0.8, points of up to 4 content words need
    every word, 5-9 words tolerate one miss. A point made only of stopwords falls back to all
    its words; a point with no words at all is ignored. Measures whether the *facts* reached
    the reader, whichever items carried them. Raises ValueError if no point is scorable.
    """
    pool: set[str] = set()
    for text in texts_returned:
        pool |= content_words(text)
    scored = covered = 0
    for point in checklist:
        words = content_words(point)
        if not words:
            words = set(_WORD.findall(unicodedata.normalize("NFKC", point).casefold()))
            if not words:
                continue
        scored += 1
        if len(words & pool) >= threshold * len(words) - 1e-9:
            covered += 1
    if scored == 0:
        raise ValueError("checklist has no scorable points")
    return covered / scored


def distractor_rate(
    returned_top_k: Iterable[Hashable], distractors: Iterable[Hashable], k: int | None = None
) -> float:
    """Fraction of the returned top k that are distractors: ``|top_k ∩ D| / |top_k|``.

    Distractors are items that look relevant but are wrong or outdated; returning them can
    mislead the reader even when gold is present. Returns 0.0 when nothing was returned.
    """
    if k is not None and k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    top = dedupe_ranked(returned_top_k)
    if k is not None:
        top = top[:k]
    if not top:
        return 0.0
    bad = set(distractors)
    return sum(1 for ident in top if ident in bad) / len(top)


# --------------------------------------------------------------------------------------------
# One question, all metrics
# --------------------------------------------------------------------------------------------


def question_metrics(
    ranked: Sequence[Hashable],
    gold: Iterable[Hashable],
    ks: Sequence[int],
    *,
    candidates: Iterable[Hashable] | None = None,
    kept: Iterable[Hashable] | None = None,
    texts: Iterable[str] | None = None,
    checklist: Sequence[str] | None = None,
    distractors: Iterable[Hashable] | None = None,
    distractor_k: int = 10,
) -> dict[str, float]:
    """All per-question metrics under their report names, for one ranked list.

    Always: ``recall@k``, ``hitAny@k``, ``recall_all@k``, ``nDCG@k`` for each k, and ``MRR``
    (unbounded depth). With ``candidates``: ``candidateRecall`` and ``rankingLoss@k`` =
    candidateRecall - recall@k. With ``kept``: ``budgetLoss@k``. With ``texts`` and a
    non-empty ``checklist``: ``checklistCoverage``. With non-empty ``distractors``:
    ``distractorRate`` over the top ``distractor_k``. Keeping the names in one place keeps the
    runner, the aggregator and the report in agreement.
    """
    gold = _check(gold)
    ranked = dedupe_ranked(ranked)
    out: dict[str, float] = {}
    cand = None if candidates is None else candidate_recall(candidates, gold)
    if cand is not None:
        out["candidateRecall"] = cand
    kept_list = None if kept is None else list(kept)
    for k in ks:
        rec = recall_at_k(ranked, gold, k)
        out[f"recall@{k}"] = rec
        out[f"hitAny@{k}"] = hit_any_at_k(ranked, gold, k)
        out[f"recall_all@{k}"] = recall_all_at_k(ranked, gold, k)
        out[f"nDCG@{k}"] = ndcg_at_k(ranked, gold, k)
        if cand is not None:
            out[f"rankingLoss@{k}"] = cand - rec
        if kept_list is not None:
            out[f"budgetLoss@{k}"] = budget_loss(ranked, kept_list, gold, k)
    out["MRR"] = reciprocal_rank(ranked, gold)
    if texts is not None and checklist:
        out["checklistCoverage"] = checklist_coverage(texts, checklist)
    if distractors is not None:
        distractor_set = set(distractors)
        if distractor_set:
            out["distractorRate"] = distractor_rate(ranked, distractor_set, distractor_k)
    return out


# --------------------------------------------------------------------------------------------
# Aggregation
# --------------------------------------------------------------------------------------------


def percentile_nearest_rank(values: Iterable[float], pct: float) -> float:
    """Nearest-rank percentile: the value at 1-based rank ``ceil(pct/100 * n)`` of the sorted list.

    Always an observed value (no interpolation), so a p95 over 20 runs is the 19th slowest,
    which is easy to reason about. Raises ValueError on an empty list.
    """
    data = sorted(values)
    if not data:
        raise ValueError("no values")
    if not 0 < pct <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {pct}")
    rank = max(1, math.ceil(pct / 100 * len(data) - 1e-9))
    return data[rank - 1]


def p50(values: Iterable[float]) -> float:
    """Median (``statistics.median``: mean of the middle two for even n)."""
    return statistics.median(list(values))


def p95(values: Iterable[float]) -> float:
    """95th percentile by nearest rank (see :func:`percentile_nearest_rank`)."""
    return percentile_nearest_rank(values, 95)


class _Group:
    """Running sums for one row of the report (overall, a category or an arm)."""

    __slots__ = ("n", "sums", "counts")

    def __init__(self) -> None:
        self.n = 0
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, metrics: Mapping[str, float | None]) -> None:
        self.n += 1
        for name, value in metrics.items():
            if value is None:
                continue
            self.sums[name] = self.sums.get(name, 0.0) + float(value)
            self.counts[name] = self.counts.get(name, 0) + 1

    def summary(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "metrics": {name: self.sums[name] / self.counts[name] for name in self.sums},
            "metric_n": dict(self.counts),
        }


def _category_key(name: str) -> tuple[int, float, str]:
    """Sort "1", "2", "10" numerically and names alphabetically after them."""
    try:
        return (0, float(name), name)
    except ValueError:
        return (1, 0.0, name)


class Aggregator:
    """Collects per-question metric dicts and latencies; produces the report ``summary`` dict.

    Usage by the runner::

        agg = Aggregator(ks=(1, 5, 10))
        agg.count("questions")                       # any labelled tally
        agg.add(question_metrics(...), category="2")             # level "item"
        agg.add(question_metrics(sessions...), category="2", level="session")
        agg.add_arm("fts", {"candidateRecall": 0.5, "uniqueRecall": 0.0, "recall@10": 0.5})
        agg.add_latency("recall", 12.3)
        summary = agg.summary(meta={"dataset": "locomo-dev.json"})

    A metric value of None means "not applicable" and is left out of that metric's mean, so
    e.g. checklistCoverage is averaged only over questions that have a checklist (its count is
    in ``metric_n``). The summary shape is documented in :mod:`memcli.bench.report`.
    """

    def __init__(self, ks: Sequence[int] = (1, 3, 5, 10, 30, 50)) -> None:
        self.ks = sorted(set(ks))
        self._overall: dict[str, _Group] = {}
        self._categories: dict[str, dict[str, _Group]] = {}
        self._arms: dict[str, dict[str, _Group]] = {}
        self._latency: dict[str, list[float]] = {}
        self._counts: dict[str, int] = {}

    def add(self, metrics: Mapping[str, float | None], category: str, level: str = "item") -> None:
        """Record one scored question under the overall row and its category row."""
        self._overall.setdefault(level, _Group()).add(metrics)
        self._categories.setdefault(level, {}).setdefault(str(category), _Group()).add(metrics)

    def add_arm(self, arm: str, metrics: Mapping[str, float | None], level: str = "item") -> None:
        """Record one question's metrics for one retrieval arm (found / only-found / ranking)."""
        self._arms.setdefault(level, {}).setdefault(arm, _Group()).add(metrics)

    def add_latency(self, phase: str, ms: float) -> None:
        """Record one timing in milliseconds for a phase such as "retain" or "recall"."""
        self._latency.setdefault(phase, []).append(float(ms))

    def count(self, label: str, n: int = 1) -> None:
        """Tally anything worth reporting, e.g. "questions", "skipped:no-gold"."""
        self._counts[label] = self._counts.get(label, 0) + n

    def summary(self, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Means per level / overall / category / arm, latency percentiles and counts."""
        levels: dict[str, Any] = {}
        for level in dict.fromkeys([*self._overall, *self._arms]):
            cats = self._categories.get(level, {})
            levels[level] = {
                "overall": (self._overall.get(level) or _Group()).summary(),
                "categories": {
                    name: cats[name].summary() for name in sorted(cats, key=_category_key)
                },
                "arms": {name: g.summary() for name, g in self._arms.get(level, {}).items()},
            }
        latency = {
            phase: {
                "n": len(values),
                "p50": p50(values),
                "p95": p95(values),
                "mean": statistics.fmean(values),
            }
            for phase, values in self._latency.items()
            if values
        }
        return {
            "meta": dict(meta or {}),
            "ks": list(self.ks),
            "counts": dict(self._counts),
            "levels": levels,
            "latency_ms": latency,
        }
