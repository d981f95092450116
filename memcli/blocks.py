"""One memory as text: what the user reads and what the token budget counts."""

from __future__ import annotations

from datetime import timedelta

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
    return fact.mentioned_at.date().isoformat()


def memory_block(fact: Fact) -> str:
    """One memory as printed and as counted against the token budget."""
    who = f"{fact.context}: " if fact.context else ""
    return f"[{fact_date(fact)}] {who}{fact.text}"
