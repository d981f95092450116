"""Run the real retain and recall pipeline over benchmark cases and score where gold is lost.

For every scored question the runner records, per gold item, the first stage that lost it:

* ``never_candidate`` - no retrieval arm returned any fact of the item (a retrieval miss);
* ``ranked_out``      - some arm found it, but fusion, rerank and boosts left it outside the
  top ``loss_k`` (default 10) of the final ranking;
* ``below_floor``     - it was ranked in the top ``loss_k`` but under the relevance floor
  (recall/floor.py), so not shown;
* ``budget_cut``      - it was ranked in the top ``loss_k`` but the token budget dropped it;
* ``hit``             - it was in the top ``loss_k`` and in the output.

These classes split ``1 - recall`` into the same parts as the report's ``candidateRecall``,
``rankingLoss@k`` and ``budgetLoss@k`` columns, so a regression can be traced to one stage.

Isolation and cost: every case is retained into a fresh SQLite file in a temporary directory
(deleted as soon as its questions are asked), with one :class:`~memcli.retain.Retainer` call,
so nothing leaks between conversations. Cases are consumed one at a time from any iterable,
which lets LongMemEval's large splits stream from :func:`~memcli.bench.datasets.iter_dataset`.
The embedder is wrapped in a bounded text -> vector cache because LongMemEval haystacks share
sessions across questions: a turn seen in an earlier case is never embedded again.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from memcli import __version__
from memcli.bench.datasets import BenchCase, BenchQuestion
from memcli.bench.metrics import (
    Aggregator,
    arm_contributions,
    dedupe_ranked,
    map_ranked,
    ndcg_at_k,
    question_metrics,
    recall_at_k,
    reciprocal_rank,
)
from memcli.clock import utcnow
from memcli.fts import CJK_TERM_MODES
from memcli.recall import ARMS, RecallError, RecallOptions, RecallResult, recall
from memcli.recall.fusion import FUSION_METHODS
from memcli.recall.rerank import SYNTHETIC_MODES
from memcli.recall.types import Candidate
from memcli.retain import Retainer, RetainItem
from memcli.settings import RecallSettings
from memcli.store import Store

__all__ = [
    "BANK",
    "DEFAULT_KS",
    "LOSS_CLASSES",
    "BenchOptions",
    "BenchProgress",
    "CachingEmbedder",
    "default_ks",
    "planned_questions",
    "recall_settings",
    "run_bench",
]

#: The bank every case is retained into (each case has its own database file anyway).
BANK = "bench"

#: Cut-offs per format. LongMemEval's own protocol reports k in {1, 3, 5, 10, 30, 50}.
DEFAULT_KS: dict[str, tuple[int, ...]] = {
    "locomo": (1, 5, 10, 20, 50),
    "longmemeval": (1, 3, 5, 10, 30, 50),
    "lme": (1, 5, 10, 50),
    "jsonl": (1, 5, 10, 20, 50),
}

LOSS_CLASSES = ("never_candidate", "ranked_out", "below_floor", "budget_cut", "hit")

#: What ``now`` means per format; recorded in the report so the numbers can be reproduced.
#: LoCoMo gives no question date, so its questions are asked at the conversation's last session
#: (the latest turn time); JSONL questions without "now" likewise use the case's latest item.
NOW_RULES = {
    "locomo": "last-session",
    "longmemeval": "question_date",
    "lme": "question_date",
    "jsonl": "question-now-else-latest-item",
}

#: Recall timing keys renamed for the report: the pipeline's "total" is a recall's latency.
_PHASE_NAMES = {"total": "recall"}


def default_ks(fmt: str) -> tuple[int, ...]:
    """The k values a format is reported at when ``--k`` is not given."""
    return DEFAULT_KS.get(fmt, DEFAULT_KS["jsonl"])


@dataclass
class BenchOptions:
    """Everything that shapes a run; recorded verbatim in the report's ``meta.options``.

    ``limit`` counts *asked* questions (after the category filter and the skips for category 5
    and missing gold), across cases; a case none of whose questions is asked is not retained,
    so ``--limit 20`` on LoCoMo retains one conversation. In LongMemEval a case is a question.
    ``session_level`` None means "score sessions too when the format is LongMemEval".
    ``settings`` overrides fields of :class:`~memcli.settings.RecallSettings` by name.
    Unanswerable questions (LoCoMo category 5, LongMemEval ``_abs``) are never in the recall
    scores; with ``ask_unanswerable`` they are asked all the same, and their rows say what
    recall returned, for the relevance floor. ``raw_floor`` (None: for ``lme``) scores,
    beside the pipeline, one vector per session of its joined items, ranked by cosine alone.
    """

    dataset: str = ""
    format: str = "jsonl"
    limit: int | None = None
    categories: tuple[str, ...] | None = None
    ks: tuple[int, ...] = DEFAULT_KS["jsonl"]
    budget: str = "mid"
    max_tokens: int = 4096
    arms: tuple[str, ...] = ARMS
    rerank: bool = True
    boosts: bool = True
    reranker: str | None = None
    loss_k: int = 10
    top_n: int = 20
    session_level: bool | None = None
    # Categories never asked (besides the unanswerable questions, which are never scored).
    skip_categories: tuple[str, ...] = field(default_factory=tuple)
    ask_unanswerable: bool = True
    raw_floor: bool | None = None
    embed_cache_size: int = 500_000
    # Keep each case's store in this folder and use it again in a later run (a recall-only
    # ablation then retains nothing); None: a temporary store per case, deleted after it.
    stores: str | None = None
    # RecallSettings fields to override for an ablation (e.g. {"fusion": "rrf"}); recorded in
    # the report so a row can be re-run exactly.
    settings: dict[str, Any] = field(default_factory=dict)
    # A postgresql:// store to run every case in (one bank, emptied before and after each
    # case); None: a new SQLite file per case.
    store_url: str | None = None

    def wants_sessions(self) -> bool:
        """Session-level scores are LongMemEval's protocol; elsewhere they only add noise."""
        if self.session_level is not None:
            return self.session_level
        return self.format in ("longmemeval", "lme")

    def wants_raw_floor(self) -> bool:
        """The raw session floor: part of the LongMemEval S protocol (lme) unless asked."""
        if self.raw_floor is not None:
            return self.raw_floor
        return self.format == "lme"

    def skipped_categories(self) -> tuple[str, ...]:
        """Categories never asked: the explicit list (unanswerable questions are never
        scored whatever it says)."""
        return self.skip_categories


@dataclass
class BenchProgress:
    """One progress report. ``questions_total`` is the ``limit`` (None without one): the runner
    never reads ahead, so a caller that wants a total for a whole file counts it itself."""

    phase: str  # "retain", "recall" or "done"
    case_id: str
    cases_done: int
    questions_done: int
    questions_total: int | None
    elapsed: float


class CachingEmbedder:
    """Wraps an embedder so identical texts are embedded once per run (bounded LRU).

    LongMemEval's S split repeats haystack sessions across its 500 questions, and each question
    is its own store; without the cache the same turn would be embedded dozens of times. Each
    vector costs ``dim * 4`` bytes (1.5 KB for MiniLM), so the default bound of 500k texts stays
    under 1 GB. Everything except ``embed`` is forwarded to the wrapped model.
    """

    def __init__(self, inner: Any, max_entries: int = 500_000) -> None:
        self.inner = inner
        self.max_entries = max_entries
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vectors = self.inner.embed(missing)
            for text, vec in zip(missing, vectors):
                self._cache[text] = np.array(vec, dtype=np.float32, copy=True)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        out = []
        for text in texts:
            vec = self._cache.get(text)
            if vec is None:  # evicted within this very call (cache smaller than the batch)
                vec = np.asarray(self.inner.embed([text])[0], dtype=np.float32)
            else:
                self._cache.move_to_end(text)
            out.append(vec)
        if not out:
            return np.zeros((0, int(getattr(self.inner, "dim", 0))), dtype=np.float32)
        return np.stack(out)


# --------------------------------------------------------------------------------------------
# Question selection
# --------------------------------------------------------------------------------------------


def recall_settings(overrides: dict[str, Any]) -> RecallSettings:
    """The default recall settings with ``overrides`` applied; unknown names are a ValueError,
    so a misspelt ablation fails before any case is retained instead of silently measuring the
    defaults."""
    known = {f.name for f in fields(RecallSettings)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(
            f"unknown recall setting {unknown[0]!r} (known: {', '.join(sorted(known))})"
        )
    defaults = RecallSettings()
    for name, value in overrides.items():
        _check_setting(name, value, getattr(defaults, name))
    return replace(defaults, **overrides)


# The least a count may be (other counts: 0).
_COUNT_MINIMUMS = {"semantic_min_limit": 1, "keyword_max_terms": 1, "temporal_buckets": 1}
# Numbers with a range: (low, low allowed, high); others may be any finite number.
_NUMBER_RANGES = {
    "recency_horizon_days": (0.0, False, math.inf),
    "reply_max_gap_hours": (0.0, True, math.inf),
    "reply_share": (0.0, True, math.inf),
    "keyword_cjk_char_max_share": (0.0, True, 1.0),
    "time_query_temporal_weight": (0.0, True, math.inf),
    "cjk_weak_embedder_factor": (0.0, True, math.inf),
    "cjk_keyword_factor": (0.0, True, math.inf),
    "temporal_spread_factor": (0.0, True, math.inf),
    "document_gap_hours": (0.0, True, math.inf),
    "floor_item_share": (0.0, False, 1.0),
    "floor_cosine": (0.0, True, 1.0),
}
# Arm weights: rank-space weights divide a rank (above 0); score weights may be 0.
_WEIGHT_LOW = {"arm_weights": (0.0, False), "score_weights": (0.0, True)}
# The text settings that name one of a few ways.
_TEXT_CHOICES = {
    "fusion": FUSION_METHODS,
    "synthetic": SYNTHETIC_MODES,
    "keyword_cjk_terms": CJK_TERM_MODES,
}


def _check_setting(name: str, value: Any, default: Any) -> None:
    """A ValueError unless value is of the default's kind: a whole number for a count, a
    finite number for a number, text for text, arm names to finite numbers for weights."""

    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    if default is None:  # an optional number (None: the model's own, e.g. floor_cosine)
        if value is not None and not (number(value) and math.isfinite(value)):
            raise ValueError(f"{name} must be a finite number or null, not {value!r}")
        if value is not None and name in _NUMBER_RANGES:
            _check_setting(name, value, 0.0)
        return
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, not {value!r}")
    elif isinstance(default, int):
        if not (isinstance(value, int) and not isinstance(value, bool)):
            raise ValueError(f"{name} must be a whole number, not {value!r}")
        least = _COUNT_MINIMUMS.get(name, 0)
        if value < least:
            raise ValueError(f"{name} must be at least {least}, not {value!r}")
    elif isinstance(default, float):
        if not number(value):
            raise ValueError(f"{name} must be a number, not {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, not {value!r}")
        low, low_ok, high = _NUMBER_RANGES.get(name, (-math.inf, True, math.inf))
        if high < math.inf and not low <= value <= high:
            raise ValueError(f"{name} must be between {low:g} and {high:g}, not {value!r}")
        if value < low or (value == low and not low_ok):
            above = "at least" if low_ok else "above"
            raise ValueError(f"{name} must be {above} {low:g}, not {value!r}")
    elif isinstance(default, str):
        if not isinstance(value, str):
            raise ValueError(f"{name} must be text, not {value!r}")
        choices = _TEXT_CHOICES.get(name)
        if choices is not None and value not in choices:
            raise ValueError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    elif isinstance(default, dict):
        if not (
            isinstance(value, dict)
            and all(k in default and number(v) and math.isfinite(v) for k, v in value.items())
        ):
            raise ValueError(
                f"{name} must map arm names to finite numbers ({', '.join(default)}), not {value!r}"
            )
        low, low_ok = _WEIGHT_LOW.get(name, (-math.inf, True))
        if any(v < low or (v == low and not low_ok) for v in value.values()):
            bound = f"of {low:g} or more" if low_ok else f"above {low:g}"
            raise ValueError(f"{name} must map arm names to numbers {bound}, not {value!r}")


def _skip_reason(question: BenchQuestion, options: BenchOptions) -> str | None:
    """Why a question is not asked, or None. Reasons become ``skipped:<reason>`` counts."""
    if options.categories and question.category not in options.categories:
        return "category-filter"
    if question.category in options.skipped_categories():
        return f"category-{question.category}"
    if question.unanswerable:
        return None if options.ask_unanswerable else "unanswerable"
    if question.gold_ids:
        return None
    if options.wants_sessions() and question.gold_sessions:
        return None  # scored at session level only; counted as "item-level:no-gold"
    return "no-gold"


def planned_questions(cases: Iterable[BenchCase], options: BenchOptions) -> int:
    """How many questions a run will ask (skips and ``limit`` applied), for a progress bar."""
    n = sum(1 for case in cases for q in case.questions if _skip_reason(q, options) is None)
    return n if options.limit is None else min(n, options.limit)


def _case_now(case: BenchCase) -> datetime:
    """The case's reference time: its latest item (LoCoMo: the last session's date)."""
    if case.items:
        return max(item.timestamp for item in case.items)
    return utcnow()


# --------------------------------------------------------------------------------------------
# Scoring one recall
# --------------------------------------------------------------------------------------------


def _loss_class(
    gold_id: str,
    candidates: set[str],
    top: Sequence[str],
    kept: set[str],
    passed: set[str] | None = None,
) -> str:
    """The first pipeline stage that lost this gold item (see the module docstring).
    `passed`: what reached the relevance floor (None: no floor ran)."""
    if gold_id not in candidates:
        return "never_candidate"
    if gold_id not in top:
        return "ranked_out"
    if gold_id not in kept:
        if passed is not None and gold_id not in passed:
            return "below_floor"
        return "budget_cut"
    return "hit"


def _arm_metrics(
    arm_lists: dict[str, list[str]], gold: set[str], ks: Sequence[int]
) -> dict[str, dict[str, float]]:
    """Per arm: gold found, gold only it found, and how its own ranking alone would score."""
    out = arm_contributions(arm_lists, gold)
    for arm, ranked in arm_lists.items():
        row = out[arm]
        for k in ks:
            row[f"recall@{k}"] = recall_at_k(ranked, gold, k)
        row["MRR"] = reciprocal_rank(ranked, gold)
        if 10 in ks:
            row["nDCG@10"] = ndcg_at_k(ranked, gold, 10)
    return out


def _candidate_signals(candidate: Candidate) -> dict[str, Any]:
    """What a floor could be calibrated on, for one candidate: its scores at every stage."""
    relevance = getattr(candidate, "relevance", None)
    return {
        "fact_id": candidate.fact_id,
        "final": round(candidate.final, 6),
        "fused": round(candidate.fused, 6),
        "arm_scores": {name: round(v, 6) for name, v in candidate.arm_scores.items()},
        "relevance": None if relevance is None else round(relevance, 6),
    }


def result_floor(result: RecallResult) -> dict[str, Any]:
    """The relevance floor a recall applied and whether anything passed it (None when the
    pipeline has no floor)."""
    applied = getattr(result, "floor", None)
    return {
        "floor": applied.to_json() if applied is not None else None,
        "passed": getattr(result, "passed", None),
    }


def _best_gold(
    result: RecallResult, source_of: dict[int, str | None], is_gold: Callable[[str], bool]
) -> dict[str, Any] | None:
    """The signals of the best-ranked candidate that is gold, with its final rank."""
    for rank, cand in enumerate(result.ranked, start=1):
        source = source_of.get(cand.fact_id)
        if source is not None and is_gold(source):
            return {"rank": rank, **_candidate_signals(cand)}
    return None


class _Scorer:
    """Turns recall results into aggregated metrics, loss tallies and per-question rows."""

    def __init__(self, options: BenchOptions) -> None:
        self.options = options
        self.agg = Aggregator(options.ks)
        self.rows: list[dict[str, Any]] = []
        # Gold per loss class at loss_k, by level ("item", "session"): overall and per category.
        self.level_losses: dict[str, dict[str, int]] = {}
        self.level_category_losses: dict[str, dict[str, dict[str, int]]] = {}

    @property
    def losses(self) -> dict[str, int]:
        return self.level_losses.get("item", dict.fromkeys(LOSS_CLASSES, 0))

    @property
    def category_losses(self) -> dict[str, dict[str, int]]:
        return self.level_category_losses.get("item", {})

    def _tally(self, category: str, loss: str, level: str = "item") -> None:
        totals = self.level_losses.setdefault(level, dict.fromkeys(LOSS_CLASSES, 0))
        totals[loss] += 1
        per_category = self.level_category_losses.setdefault(level, {})
        bucket = per_category.setdefault(category, dict.fromkeys(LOSS_CLASSES, 0))
        bucket[loss] += 1

    def unanswerable(self, case: BenchCase, question: BenchQuestion, result: RecallResult) -> None:
        """A question nothing answers: never in the recall scores; its row says what recall
        gave back (how many results, the best one's scores) for the relevance floor."""
        self.agg.count("asked:unanswerable")
        if getattr(result, "floor", None) is not None and not result.results:
            self.agg.count("unanswerable:nothing-shown")
        top = result.ranked[0] if result.ranked else None
        self.rows.append(
            {
                "id": question.id,
                "case": case.id,
                "category": question.category,
                "query": question.query,
                "unanswerable": True,
                "kept_facts": len(result.results),
                "top": _candidate_signals(top) if top is not None else None,
                **{k: v for k, v in result_floor(result).items()},
            }
        )
        for phase, seconds in result.timings.items():
            self.agg.add_latency(_PHASE_NAMES.get(phase, phase), seconds * 1000.0)

    def raw_floor(self, question: BenchQuestion, ranked_sessions: list[str]) -> None:
        """The raw floor's session ranking for one answerable question (level "raw-floor")."""
        gold_s = set(question.gold_sessions)
        if not gold_s:
            return
        metrics = question_metrics(ranked_sessions, gold_s, self.options.ks)
        self.agg.add(metrics, question.category, level="raw-floor")
        self.agg.count("scored:raw-floor")

    def skip(
        self, case: BenchCase, question: BenchQuestion, reason: str, detail: str | None = None
    ) -> None:
        """Count a question not asked; rows only for data-driven skips, not for the user's
        --category or --limit (those would swamp the report with rows nobody reads)."""
        self.agg.count(f"skipped:{reason}")
        if reason in ("category-filter", "limit"):
            return
        self.rows.append(
            {
                "id": question.id,
                "case": case.id,
                "category": question.category,
                "skipped": reason,
                **({"detail": detail} if detail else {}),
            }
        )

    def score(
        self,
        case: BenchCase,
        question: BenchQuestion,
        result: RecallResult,
        source_of: dict[int, str | None],
        session_of: dict[str, str | None],
    ) -> None:
        opts = self.options
        ks = opts.ks
        ranked = dedupe_ranked(
            s for c in result.ranked if (s := source_of.get(c.fact_id)) is not None
        )
        kept = dedupe_ranked(
            s for c in result.results if (s := source_of.get(c.fact_id)) is not None
        )
        arm_lists = {
            name: dedupe_ranked(s for h in arm.hits if (s := source_of.get(h.fact_id)) is not None)
            for name, arm in result.arms.items()
        }
        candidates: set[str] = set().union(*arm_lists.values()) if arm_lists else set()
        # What the relevance floor lets be shown, when one ran (a floor cut is its own loss
        # class): nothing of a question that did not pass, else its candidates that reach
        # the item level.
        passed = (
            {
                s
                for c in result.ranked
                if result.passed
                and result.floor.shows(c.relevance)
                and (s := source_of.get(c.fact_id)) is not None
            }
            if getattr(result, "floor", None) is not None
            else None
        )
        category = question.category
        row: dict[str, Any] = {
            "id": question.id,
            "case": case.id,
            "category": category,
            "query": question.query,
            "gold": sorted(question.gold_ids),
            "ranked": ranked[: opts.top_n],
            "kept": len(kept),
            "kept_facts": len(result.results),
            "tokens": result.total_tokens,
            "candidates": len(candidates),
            "top": _candidate_signals(result.ranked[0]) if result.ranked else None,
            **result_floor(result),
        }
        if question.gold_ids:
            row["gold_top"] = _best_gold(result, source_of, question.gold_ids.__contains__)
        if question.gold_sessions:
            row["gold_session_top"] = _best_gold(
                result, source_of, lambda s: session_of.get(s) in question.gold_sessions
            )
        best = row.get("gold_session_top") if opts.wants_sessions() else row.get("gold_top")
        if getattr(result, "floor", None) is not None and best is not None:
            # Is the question's best-ranked gold item shown: does the question pass the
            # floor, and the item reach the share of it that items are shown down to?
            passes = bool(result.passed) and result.floor.shows(best["relevance"])
            self.agg.count("floor:best-gold-" + ("kept" if passes else "cut"))
        if question.gold_ids:
            gold = set(question.gold_ids)
            texts = [c.fact.text for c in result.results if c.fact is not None]
            metrics = question_metrics(
                ranked,
                gold,
                ks,
                candidates=candidates,
                kept=kept,
                texts=texts,
                checklist=question.checklist,
                distractors=question.distractor_ids,
                distractor_k=opts.loss_k,
            )
            self.agg.add(metrics, category)
            # The same over what recall printed (after the floor and the budget): what a
            # caller of `mem recall` sees.
            self.agg.add(question_metrics(kept, gold, ks), category, level="shown")
            self.agg.count("scored:item")
            for arm, values in _arm_metrics(arm_lists, gold, ks).items():
                self.agg.add_arm(arm, values)
            top = ranked[: opts.loss_k]
            kept_set = set(kept)
            position = {ident: i for i, ident in enumerate(ranked, start=1)}
            arm_pos = {
                arm: {ident: i for i, ident in enumerate(ids, start=1)}
                for arm, ids in arm_lists.items()
            }
            loss: dict[str, str] = {}
            ranks: dict[str, dict[str, int | None]] = {}
            for g in sorted(gold):
                loss[g] = _loss_class(g, candidates, top, kept_set, passed)
                self._tally(category, loss[g])
                ranks[g] = {"fused": position.get(g)}
                ranks[g].update({arm: pos.get(g) for arm, pos in arm_pos.items()})
            row["loss"] = loss
            row["ranks"] = ranks
            row["metrics"] = {
                name: metrics[name]
                for name in (
                    "candidateRecall",
                    f"recall@{opts.loss_k}",
                    "MRR",
                    f"budgetLoss@{opts.loss_k}",
                )
                if name in metrics
            }
        else:
            self.agg.count("item-level:no-gold")
        if opts.wants_sessions() and question.gold_sessions:
            gold_s = set(question.gold_sessions)
            ranked_s = map_ranked(ranked, session_of)
            kept_s = map_ranked(kept, session_of)
            cands_s = {s for c in candidates if (s := session_of.get(c)) is not None}
            metrics_s = question_metrics(ranked_s, gold_s, ks, candidates=cands_s, kept=kept_s)
            self.agg.add(metrics_s, category, level="session")
            self.agg.add(question_metrics(kept_s, gold_s, ks), category, level="session shown")
            self.agg.count("scored:session")
            top_s = ranked_s[: opts.loss_k]
            kept_s_set = set(kept_s)
            passed_s = None if passed is None else {s for p in passed if (s := session_of.get(p))}
            loss_s = {
                g: _loss_class(g, cands_s, top_s, kept_s_set, passed_s) for g in sorted(gold_s)
            }
            for g in sorted(gold_s):
                self._tally(category, loss_s[g], level="session")
            row["session_loss"] = loss_s
            arm_lists_s = {arm: map_ranked(ids, session_of) for arm, ids in arm_lists.items()}
            for arm, values in _arm_metrics(arm_lists_s, gold_s, ks).items():
                self.agg.add_arm(arm, values, level="session")
            row["gold_sessions"] = sorted(gold_s)
            row["ranked_sessions"] = ranked_s[: opts.top_n]
            row["session_metrics"] = {
                name: metrics_s[name]
                for name in ("candidateRecall", f"recall@{opts.loss_k}", "MRR")
                if name in metrics_s
            }
        for phase, seconds in result.timings.items():
            self.agg.add_latency(_PHASE_NAMES.get(phase, phase), seconds * 1000.0)
        self.rows.append(row)


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def _kept_store_path(
    folder: Path, options: BenchOptions, index: int, case: BenchCase, embedder: Any
) -> Path:
    """Where a case's store is kept with ``stores``: named by the format, the case and what
    made its content (the embedder's fingerprint, mem's version and schema, the retain
    settings and the items), so a store made otherwise is never reused."""
    import hashlib

    from memcli.retain import semantic_link_floor
    from memcli.settings import RetainSettings
    from memcli.store import SCHEMA_VERSION

    made_by = [
        options.format,
        case.id,
        getattr(embedder, "fingerprint", None) or getattr(embedder, "name", ""),
        __version__,
        str(SCHEMA_VERSION),
        repr(RetainSettings()),
        # The link floor retain applies (the settings leave it to the model's table).
        str(semantic_link_floor(embedder, RetainSettings())),
        *(f"{i.id}\0{i.text}\0{i.timestamp}\0{i.context}\0{i.document_id}" for i in case.items),
    ]
    digest = hashlib.sha256("\n".join(map(str, made_by)).encode("utf-8", "replace")).hexdigest()
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{options.format}-{index:04d}-{digest[:20]}.db"


def _kept_store_ready(path: Path) -> bool:
    """Whether a kept store was retained to its end (else it is made again from nothing)."""
    if Path(f"{path}.done").exists() and path.exists():
        return True
    _remove_db(path)
    return False


def _kept_store_done(path: Path) -> None:
    Path(f"{path}.done").write_text("retained\n")


def _remove_db(path: Path) -> None:
    """Delete a case's database and its WAL side files as soon as the case is done."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass


def _case_store(options: BenchOptions, db_path: Path) -> Any:
    """A store with no bench bank: a new file, or the --store URL's with the bank emptied."""
    if options.store_url is None:
        return Store(db_path)
    from memcli.store.location import open_store

    store = open_store(options.store_url)
    try:
        _drop_bench_bank(store)
    except BaseException:
        store.close()
        raise
    return store


def _drop_bench_bank(store: Any) -> None:
    bank = store.banks.bank_id(BANK)
    if bank is not None:
        with store.atomic():
            store.banks.delete_bank(bank)


def _close_case_store(options: BenchOptions, store: Any, db_path: Path) -> None:
    try:
        if options.store_url is not None:
            _drop_bench_bank(store)
    finally:
        store.close()
        if not options.stores:  # a kept store stays for the next run (--stores)
            _remove_db(db_path)


def run_bench(
    cases: Iterable[BenchCase],
    options: BenchOptions,
    *,
    embedder: Any,
    reranker: Any | None = None,
    progress: Callable[[BenchProgress], None] | None = None,
    floor_embedder: Any | None = None,
) -> dict[str, Any]:
    """Retain each case into a fresh store, ask its questions, and return the report summary.

    ``floor_embedder`` embeds the raw floor's sessions (options.wants_raw_floor(); the
    protocol's floor is MiniLM's, whatever the pipeline's embedder): one vector per session of
    its items' texts joined, ranked by cosine to the query, scored at level "raw-floor".

    The result is :meth:`Aggregator.summary` (shape in :mod:`memcli.bench.report`) plus
    ``"losses"`` (gold items per loss class at ``loss_k``, overall and per category) and
    ``"questions"`` (one row per question, skipped ones included with their reason). Questions
    without their own ``now`` are asked at the case's latest item time, which for LoCoMo is the
    last session of the conversation. Raises :class:`RecallError` for invalid recall options
    before any case is retained, so a typo does not cost a long retain.
    """
    from memcli.recall import validate

    base = RecallOptions(
        budget=options.budget,
        max_tokens=options.max_tokens,
        rerank=options.rerank,
        boosts=options.boosts,
        arms=tuple(options.arms),
    )
    validate(base)
    settings = recall_settings(options.settings)
    if options.loss_k < 1 or not options.ks or min(options.ks) < 1:
        raise ValueError("k values must be positive")
    started = time.perf_counter()
    started_at = datetime.now(timezone.utc).replace(microsecond=0)
    model = CachingEmbedder(embedder, options.embed_cache_size)
    if options.wants_raw_floor() and floor_embedder is None:
        raise ValueError("the raw floor needs an embedder (floor_embedder)")
    scorer = _Scorer(options)
    agg = scorer.agg
    asked = 0
    cases_done = 0
    total = options.limit

    def report(phase: str, case_id: str) -> None:
        if progress is not None:
            progress(
                BenchProgress(
                    phase, case_id, cases_done, asked, total, time.perf_counter() - started
                )
            )

    with tempfile.TemporaryDirectory(prefix="mem-bench-") as tmp:
        for index, case in enumerate(cases):
            if options.limit is not None and asked >= options.limit:
                break
            agg.count("cases:seen")
            selected: list[BenchQuestion] = []
            for question in case.questions:
                agg.count("questions")
                reason = _skip_reason(question, options)
                if reason is None and options.limit is not None:
                    if asked + len(selected) >= options.limit:
                        reason = "limit"
                if reason is not None:
                    scorer.skip(case, question, reason)
                else:
                    selected.append(question)
            if not selected:
                continue
            items = [i for i in case.items if i.text and i.text.strip()]
            if len(items) < len(case.items):
                agg.count("items:empty-skipped", len(case.items) - len(items))
            case_now = _case_now(case)
            session_of = {i.id: i.session_id for i in case.items}
            db_path = Path(tmp) / f"case-{index}.db"
            reused = False
            if options.stores:
                db_path = _kept_store_path(Path(options.stores), options, index, case, embedder)
                reused = _kept_store_ready(db_path)
            report("retain", case.id)
            store = _case_store(options, db_path)
            try:
                if reused:
                    agg.count("cases:reused")
                    summary = None
                else:
                    summary = Retainer(store, BANK, model, now=case_now).retain(
                        [
                            RetainItem(
                                text=i.text,
                                source_id=i.id,
                                timestamp=i.timestamp,
                                context=i.context,
                                document_id=i.document_id,
                            )
                            for i in items
                        ]
                    )
                agg.count("cases")
                if summary is not None:
                    if summary.interrupted:
                        raise KeyboardInterrupt
                    agg.count("items", summary.items)
                    agg.count("facts", summary.facts)
                    if summary.duplicates:
                        agg.count("retain:duplicates", summary.duplicates)
                    agg.add_latency("retain", summary.seconds * 1000.0)
                    if summary.items:
                        agg.add_latency("retain/item", summary.seconds * 1000.0 / summary.items)
                    if options.stores:
                        _kept_store_done(db_path)
                source_of = store.facts.source_ids(store.banks.require_bank(BANK))
                floor_rank = (
                    _raw_floor_ranker(items, floor_embedder) if options.wants_raw_floor() else None
                )
                for question in selected:
                    opts = RecallOptions(**{**asdict(base), "now": question.now or case_now})
                    try:
                        result = recall(
                            store,
                            BANK,
                            question.query,
                            opts,
                            embedder=model,
                            reranker=reranker,
                            settings=settings,
                        )
                    except RecallError as exc:
                        scorer.skip(case, question, "recall-error", str(exc))
                        continue
                    asked += 1
                    if question.unanswerable:
                        scorer.unanswerable(case, question, result)
                    else:
                        scorer.score(case, question, result, source_of, session_of)
                        if floor_rank is not None:
                            scorer.raw_floor(question, floor_rank(question.query))
                    report("recall", case.id)
            finally:
                _close_case_store(options, store, db_path)
            cases_done += 1
    report("done", "")
    seconds = time.perf_counter() - started
    agg.count("embed:cached", model.hits)
    agg.count("embed:computed", model.misses)
    meta = {
        "dataset": options.dataset,
        "format": options.format,
        "started": started_at.isoformat(),
        "seconds": round(seconds, 1),
        "version": __version__,
        "embedder": getattr(embedder, "name", type(embedder).__name__),
        "reranker": getattr(reranker, "name", None) if (reranker and options.rerank) else None,
        "now": NOW_RULES.get(options.format, NOW_RULES["jsonl"]),
        "options": _options_meta(options),
    }
    summary = agg.summary(meta=meta)
    levels = summary["levels"]
    summary["levels"] = {
        name: levels[name]
        for name in sorted(levels, key=lambda n: (n != "item", n != "session", n))
    }
    summary["losses"] = {
        "k": options.loss_k,
        "overall": scorer.losses,
        "categories": {
            name: scorer.category_losses[name]
            for name in sorted(scorer.category_losses, key=_category_order)
        },
    }
    if "session" in scorer.level_losses:
        per_category = scorer.level_category_losses["session"]
        summary["session_losses"] = {
            "k": options.loss_k,
            "overall": scorer.level_losses["session"],
            "categories": {
                name: per_category[name] for name in sorted(per_category, key=_category_order)
            },
        }
    summary["questions"] = scorer.rows
    return summary


def _raw_floor_ranker(items: Sequence[Any], floor_embedder: Any) -> Callable[[str], list[str]]:
    """The raw floor for one case: one vector per session of its items' texts joined by
    newlines (the embedder truncates a long session to its own limit, as any single-vector
    baseline does), and a function that ranks the sessions by cosine to a query."""
    texts: dict[str, list[str]] = {}
    for item in items:
        if item.session_id is not None:
            texts.setdefault(item.session_id, []).append(item.text)
    sessions = list(texts)
    if not sessions:
        return lambda query: []
    vectors = np.asarray(floor_embedder.embed(["\n".join(texts[s]) for s in sessions]))
    embed_query = getattr(floor_embedder, "embed_query", None)

    def rank(query: str) -> list[str]:
        vec = embed_query(query) if embed_query else floor_embedder.embed([query])[0]
        cosines = vectors @ np.asarray(vec, dtype=np.float32)
        order = sorted(range(len(sessions)), key=lambda i: (-float(cosines[i]), i))
        return [sessions[i] for i in order]

    return rank


def _options_meta(options: BenchOptions) -> dict[str, Any]:
    """The options that change numbers (dataset/format are already top-level meta)."""
    out = asdict(options)
    for key in ("dataset", "format", "top_n", "embed_cache_size", "stores"):
        out.pop(key, None)
    out["ks"] = list(options.ks)
    out["arms"] = list(options.arms)
    out["categories"] = list(options.categories) if options.categories else None
    out["skip_categories"] = list(options.skipped_categories())
    out["session_level"] = options.wants_sessions()
    out["raw_floor"] = options.wants_raw_floor()
    if options.store_url is not None:
        from memcli.storeurl import shown

        out["store_url"] = shown(options.store_url)  # never its password
    return out


def _category_order(name: str) -> tuple[int, float, str]:
    """Numeric category names ("1", "10") numerically, then the rest alphabetically."""
    try:
        return (0, float(name), name)
    except ValueError:
        return (1, 0.0, name)
