"""Boosts on top of the reranker score: final = base x recency x temporal x proof x speaker,
where each boost = 1 + alpha x (signal - 0.5), so a neutral signal (0.5) leaves the score
unchanged. The temporal boost also answers a question that asks when (stated_time_signal).

The speaker boost is ours, not the reference design's. A question about a person ("What did
Caroline paint?") is usually answered by that person's own memories, yet no arm sees who said
what: a speaker's name is on half the facts of a two-person conversation, so its BM25 weight
is ~0, and the embedding is dominated by the topic. On LoCoMo, 96% of the gold turns of
questions naming one speaker were said by that speaker (base rate 50%); the boost gained ~4
points of MRR there (bench/RESULTS.md). A query that names no speaker changes nothing; one that
names all of them only moves memories with no or another context (x0.8) below theirs."""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

from memcli import fts
from memcli.clock import utc_to_local
from memcli.display import has_searchable_text
from memcli.recall.types import Candidate
from memcli.settings import RecallSettings
from memcli.store import Fact
from memcli.timeparse import TimeSpan


def boost(signal: float, alpha: float) -> float:
    return 1.0 + alpha * (signal - 0.5)


def recency_signal(fact: Fact, now: datetime, horizon_days: float = 365.0) -> float:
    """clamp(1 - days_ago / horizon, 0.1, 1). A period counts from its end, and while it is
    still running it is capped at 0.5 (it is not 'recent news' yet)."""
    if fact.occurred_start is not None:
        when = fact.occurred_end or fact.occurred_start
        running = fact.occurred_end is not None and fact.occurred_end > now >= fact.occurred_start
    else:
        when, running = fact.mentioned_at, False
    days_ago = (now - when).total_seconds() / 86400
    signal = min(max(1.0 - days_ago / horizon_days, 0.1), 1.0)
    return min(signal, 0.5) if running else signal


_ANY_UTC_OFFSET = timedelta(days=1)


def temporal_signal(fact: Fact, window: TimeSpan | None) -> float:
    """1 - min(days from the window centre / half the window, 1); 0.5 when the query has no
    time. An open window ("since May") has no centre: 1 inside it, 0 outside."""
    if window is None:
        return 0.5
    # On the user's calendar, as the window is: a period as stored, the instant said as
    # local time. An instant more than a day outside the window (no zone is that far from
    # UTC) stays outside it and scores 0 either way, so most candidates skip the conversion.
    if fact.occurred_start is None:
        said = fact.mentioned_at
        # As differences: the window's ends widened by a day can pass datetime's range.
        if said - window.start < -_ANY_UTC_OFFSET or said - window.end >= _ANY_UTC_OFFSET:
            return 0.0
        start = utc_to_local(said)
    else:
        start = fact.occurred_start
    end = fact.occurred_end or start
    if window.open_ended:
        # Half-open like the window; a bare time is a point.
        inside = start < window.end and (end > window.start or start >= window.start)
        return 1.0 if inside else 0.0
    mid = start + (end - start) / 2
    centre = window.start + (window.end - window.start) / 2
    half_days = max((window.end - window.start).total_seconds() / 86400 / 2, 1e-9)
    days = abs((mid - centre).total_seconds()) / 86400
    return 1.0 - min(days / half_days, 1.0)


def stated_time_signal(fact: Fact) -> float:
    """For a question that asks when: 1 for a memory that says a time of its own (retain
    found a time phrase in it: "yesterday", "in May"), 0 for one that does not. The answer
    to "When did Caroline go to the support group?" is the memory that says when ("I went
    yesterday"), not one that only talks about the group."""
    return 1.0 if fact.occurred_start is not None else 0.0


_WORD = re.compile(r"[^\W_]+")


# Longest name looked for inside a run of CJK characters (Chinese names are 2-4 characters).
CJK_NAME_CHARS = 4


def query_spans(query: str, max_words: int = 6) -> list[str]:
    """Every run of 1 to `max_words` consecutive words of the query, as written (so "the C++
    team" yields "C++ team"): the names a query could give, to look up among the contexts.
    Chinese and Japanese put no space after a name ("王磊的猫"), so inside a run of CJK
    characters every 2 to CJK_NAME_CHARS characters are looked up too."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(query)]
    spans = [
        query[words[i][0] : words[j][1]]
        for i in range(len(words))
        for j in range(i, min(i + max_words, len(words)))
    ]
    for run in fts.cjk_runs(query):
        spans.extend(
            run[i : i + n] for n in range(2, CJK_NAME_CHARS + 1) for i in range(len(run) - n + 1)
        )
    return list(dict.fromkeys(spans))


def _names(context: str, lowered_query: str) -> bool:
    """Whether the query names this context: as whole words, or for a context of CJK
    characters anywhere (no spaces mark where a CJK name ends)."""
    if fts.is_cjk(context):
        return context in lowered_query
    return re.search(r"(?<!\w)" + re.escape(context) + r"(?!\w)", lowered_query) is not None


def named_contexts(query: str, contexts: list[str]) -> frozenset[str]:
    """The contexts (speakers, sources) a query names as whole words, lower-cased. A context
    that is an English function word ("me", "I", "we") is never taken as named: "remind me"
    names nobody."""
    lowered = query.lower()
    return frozenset(
        c.lower()
        for c in contexts
        if c.lower() not in fts.STOP_WORDS and _names(c.lower(), lowered)
    )


def without_names(query: str, named: frozenset[str]) -> str:
    """The query with the contexts it names taken out (a possessive "'s" with them): what its
    vector is made from when the speaker boost weighs who said what.

    A memory is embedded with its speaker's name in front ("Tim: I'm learning German"), and
    the other people's memories name them too ("Tim, how is German going?"). A name in the
    query's vector pulls it towards everything said by or to that person alike, which the
    boost already sorts out, and away from the topic. On LoCoMo the semantic arm alone gains
    R@10 0.649 -> 0.708 without the names (bench/RESULTS.md). A query that is nothing but a
    name keeps it."""
    out = query
    for name in sorted(named, key=len, reverse=True):
        if fts.is_cjk(name):
            out = re.sub(re.escape(name) + "[的の의]?", " ", out)
        else:
            out = re.sub(
                r"(?<!\w)" + re.escape(name) + r"(?:['\u2019]s)?(?!\w)", " ", out, flags=re.I
            )
    out = re.sub(r"\s+([?!.,;:])", r"\1", " ".join(out.split()))
    return out if has_searchable_text(out) else query


def speaker_signal(fact: Fact, named: frozenset[str]) -> float:
    """1 for a memory whose context (who said it) the query names, 0 for one from another
    context when the query names some, 0.5 when the query names none."""
    if not named:
        return 0.5
    return 1.0 if (fact.context or "").lower() in named else 0.0


def proof_signal(fact: Fact) -> float:
    """clamp(0.5 + ln(proof_count) / 10, 0, 1) for observations; 0.5 for everything else."""
    if fact.fact_type != "observation":
        return 0.5
    return min(max(0.5 + math.log(max(fact.proof_count, 1)) / 10, 0.0), 1.0)


def apply(
    candidates: list[Candidate],
    now: datetime,
    window: TimeSpan | None,
    settings: RecallSettings,
    enabled: bool = True,
    named: frozenset[str] = frozenset(),
    asks_when: bool = False,
) -> list[Candidate]:
    """Compute boosts and final scores, and return the candidates in final order.

    The temporal boost is how a memory's time fits the time the query asks about: with a
    window ("last week"), its distance from the window (temporal_alpha); for a question that
    asks when and names no window, whether the memory says a time (when_alpha)."""
    # A neutral signal (0.5) boosts by exactly 1.0: without a time window, a named speaker
    # or observations those boosts are that constant, computed once, not per candidate.
    when = asks_when and window is None and settings.when_alpha != 0
    temporal_neutral = window is None and not when
    speaker_neutral = not named
    for c in candidates:
        fact = c.fact
        assert fact is not None
        if enabled:
            c.recency = boost(
                recency_signal(fact, now, settings.recency_horizon_days), settings.recency_alpha
            )
            if temporal_neutral:
                c.temporal = 1.0
            elif when:
                c.temporal = boost(stated_time_signal(fact), settings.when_alpha)
            else:
                c.temporal = boost(temporal_signal(fact, window), settings.temporal_alpha)
            c.proof = (
                boost(proof_signal(fact), settings.proof_alpha)
                if fact.fact_type == "observation"
                else 1.0
            )
            c.speaker = (
                1.0
                if speaker_neutral
                else boost(speaker_signal(fact, named), settings.speaker_alpha)
            )
        else:
            c.recency = c.temporal = c.proof = c.speaker = 1.0
        c.final = c.base * c.recency * c.temporal * c.proof * c.speaker
    ordered = sorted(candidates, key=lambda c: (-c.final, c.rrf_rank))
    for i, c in enumerate(ordered, start=1):
        c.final_rank = i
    return ordered
