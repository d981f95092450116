"""Times as the JSON contract writes them: every one with an explicit offset.

The store keeps naive times (memcli/store/types.py `iso`): an instant (when a memory was
said, recorded, closed; a recall's `now`) is UTC, and the time a memory talks about
(`occurred_start`/`occurred_end`, a query's time window) is a span of the speaker's calendar
("May 9" is that day, wherever it was said). Written without an offset, jq and agents read
both as local time: "2026-03-10T04:00:00" for a midnight in New York.

So the JSON (CLI `--format json`, MCP, the library's `to_json()`) writes an instant in UTC
with `Z` ("2026-03-10T04:00:00Z") and a calendar time as the wall-clock time it is, with the
offset of the local time zone at that time ("2026-05-09T00:00:00+01:00"; "+00:00" on a UTC
machine): both parse to the right moment, and the calendar day stays the one said. The
export file keeps the store's naive form: it is a storage format, compared byte for byte on
a round trip (memcli/exchange.py).
"""

from __future__ import annotations

from datetime import datetime, timezone


def _naive(value: datetime | str) -> datetime:
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc).replace(tzinfo=None)
    return when


def instant(value: datetime | str | None) -> str | None:
    """A stored instant (naive UTC, or its ISO text) as ISO 8601 UTC with `Z`."""
    if value is None or value == "":
        return None
    return _naive(value).isoformat(timespec="seconds") + "Z"


def calendar(value: datetime | str | None) -> str | None:
    """A stored calendar time (naive wall-clock) with the local zone's offset at that time."""
    if value is None or value == "":
        return None
    from memcli.clock import local_zone

    wall = _naive(value)
    try:
        offset = wall.replace(tzinfo=local_zone()).utcoffset()
    except (OverflowError, ValueError):  # within a day of datetime's range
        offset = None
    aware = wall.replace(tzinfo=timezone(offset) if offset is not None else timezone.utc)
    text = aware.isoformat(timespec="seconds")
    return text


def event(value: datetime | str | None, is_period: bool) -> str | None:
    """A bank's first or last memory: a period's start (calendar) or when it was said."""
    return calendar(value) if is_period else instant(value)
