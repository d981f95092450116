"""One memory as text: what the user reads and what the token budget counts."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from memcli.clock import utc_to_local
from memcli.store import Fact


def fact_date(fact: Fact) -> str:
    """The date shown with a memory: when it happened if known, else when it was said."""
    if fact.occurred_start is not None:
        start = fact.occurred_start.date().isoformat()
        end = fact.occurred_end
        if end is not None and (end - fact.occurred_start).total_seconds() > 86400:
            # Ends are exclusive: show the last day inside the period.
            last = (end - timedelta(seconds=1)).date().isoformat()
            return f"{start}..{last}"
        return start
    return said_on(fact).isoformat()


def said_on(fact: Fact) -> date:
    """The day a memory was said, in the user's time zone: mentioned_at is an instant (UTC),
    while the times a memory talks about are calendar days and are shown as they are."""
    return utc_to_local(fact.mentioned_at).date()


def _span(start: datetime, end: datetime | None) -> str:
    """A period as briefly as it reads: a day, a whole month (2026-11), a whole year (2025),
    else first..last day (ends are exclusive)."""
    day = timedelta(days=1)
    if end is None or end - start <= day:
        return start.date().isoformat()
    if start == datetime(start.year, 1, 1) and end == datetime(start.year + 1, 1, 1):
        return str(start.year)
    if start.day == 1 and start == datetime(start.year, start.month, 1):
        nxt = datetime(start.year + start.month // 12, start.month % 12 + 1, 1)
        if end == nxt:
            return f"{start.year:04d}-{start.month:02d}"
    last = (end - timedelta(seconds=1)).date().isoformat()
    return f"{start.date().isoformat()}..{last}"


def said_and_about(fact: Fact) -> str:
    """When the memory was said and, kept apart, the time it talks about: "2026-03-21" when
    it is about that day (or no other time is known), else "said 2026-02-10, about 2026-11
    (future when said)". A plan said in February about November must not read as done."""
    said_day = said_on(fact)
    said = said_day.isoformat()
    start = fact.occurred_start
    if start is None:
        return said
    about = _span(start, fact.occurred_end)
    if about == said:
        return said
    ahead = " (future when said)" if start.date() > said_day else ""
    return f"said {said}, about {about}{ahead}"


def memory_block(fact: Fact) -> str:
    """One memory as printed and as counted against the token budget."""
    who = f"{fact.context}: " if fact.context else ""
    return f"[{said_and_about(fact)}] {who}{fact.text}"
