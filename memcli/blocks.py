"""One memory as text: what the user reads and what the token budget counts."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from memcli import tokens
from memcli.clock import utc_to_local
from memcli.display import one_line
from memcli.store.types import Fact


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


def period_text(start: datetime, end: datetime | None) -> str:
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
    return said_and_about_times(fact.mentioned_at, fact.occurred_start, fact.occurred_end)


def said_and_about_times(
    mentioned_at: datetime, start: datetime | None, end: datetime | None
) -> str:
    """said_and_about of a memory with these times (retain has no Fact yet)."""
    said_day = utc_to_local(mentioned_at).date()
    said = said_day.isoformat()
    if start is None:
        return said
    about = period_text(start, end)
    if about == said:
        return said
    ahead = " (future when said)" if start.date() > said_day else ""
    return f"said {said}, about {about}{ahead}"


def memory_block(fact: Fact) -> str:
    """One memory as printed and as counted against the token budget."""
    return f"[{said_and_about(fact)}]{block_tail(fact.context, fact.text)}"


def block_tail(context: str | None, text: str) -> str:
    """A memory block after its date: " who: text". Its token count is stored with the fact
    (facts.tail_tokens), counted when the fact is written."""
    # one_line: a context stored with line breaks (before retain made it one line) still
    # prints as one label, never as the start of another block.
    who = f"{one_line(context)}: " if context else ""
    return f" {who}{text}"


def block_tokens(fact: Fact) -> int:
    """count_tokens(memory_block(fact)) without loading the encoding when the fact carries
    its tail's count: cl100k's pre-tokenizer always cuts between the "]" and the space after
    it (a run of punctuation stops at whitespace; the next piece starts at the space), so the
    block's count is the date's plus the tail's (tests/test_tokens.py checks it on real text)."""
    date = f"[{said_and_about(fact)}]"
    if fact.tail_tokens is None or not _counted_as_printed(fact.context):
        return tokens.count_tokens(date + block_tail(fact.context, fact.text))
    return tokens.count_tokens_any_digits(date) + fact.tail_tokens


def block_tokens_at_least(fact: Fact, date_tokens: int) -> int:
    """A lower bound of block_tokens(fact) that formats no date: the stored tail's count and
    `date_tokens`, the fewest a block's bracketed date takes (budget.block_floor() - 1)."""
    if fact.tail_tokens is None or not _counted_as_printed(fact.context):
        return date_tokens + 1
    return date_tokens + fact.tail_tokens


def _counted_as_printed(context: str | None) -> bool:
    """Whether a fact's stored tail count is of its tail as printed now: not for a context
    stored with line breaks or runs of spaces (block_tail prints it as one line)."""
    return context is None or context == one_line(context)


def tail_tokens(context: str | None, text: str) -> int:
    """What a fact stores as its tail_tokens."""
    return tokens.count_tokens(block_tail(context, text))
