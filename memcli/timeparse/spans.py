"""Spans of time and the calendar arithmetic every scanner of dates shares (the English
one in parse.py, the CJK one in cjk.py): half-open, naive UTC, weeks from Monday."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any

# --------------------------------------------------------------------------------------------
# TimeSpan
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimeSpan:
    """A period of time, half-open: ``start <= t < end`` (naive UTC).

    Half-open so that consecutive periods tile without overlap or gaps: the day 2023-05-07 is
    ``[2023-05-07T00:00, 2023-05-08T00:00)`` and May 2023 ends where June 2023 starts.

    ``open_ended``: a query window that one side of runs to now or to :data:`OPEN_START`
    ("since May", "before 2020"): it asks for all of its time alike, it has no centre.
    """

    start: datetime
    end: datetime
    open_ended: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(f"TimeSpan ends before it starts: {self.start} > {self.end}")

    @property
    def center(self) -> datetime:
        """The midpoint, used for temporal proximity scoring."""
        return self.start + (self.end - self.start) / 2

    @property
    def days(self) -> float:
        """Length in days (1.0 for a calendar day, 7.0 for a week)."""
        return (self.end - self.start).total_seconds() / 86400.0

    def contains(self, when: datetime) -> bool:
        """True when ``when`` falls inside the half-open span."""
        return self.start <= when < self.end

    def overlaps(self, other: TimeSpan) -> bool:
        """True when the two half-open spans share at least an instant."""
        return self.start < other.end and other.start < self.end

    def to_json(self) -> dict[str, Any]:
        """ISO strings for traces and JSON output (naive: a fact's period and a query's
        window are spans of the speaker's calendar, an instant is UTC)."""
        out: dict[str, Any] = {"start": self.start.isoformat(), "end": self.end.isoformat()}
        if self.open_ended:
            out["open_ended"] = True
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TimeSpan:
        """Inverse of :meth:`to_json`."""
        return cls(
            to_utc_naive(datetime.fromisoformat(str(data["start"]))),
            to_utc_naive(datetime.fromisoformat(str(data["end"]))),
            open_ended=data.get("open_ended") is True,
        )


def to_utc_naive(when: datetime) -> datetime:
    """Return ``when`` as naive UTC: aware values are converted, naive ones taken as UTC."""
    if when.tzinfo is not None and when.utcoffset() is not None:
        return when.astimezone(timezone.utc).replace(tzinfo=None)
    return when.replace(tzinfo=None)


# --------------------------------------------------------------------------------------------
# Calendar helpers
# --------------------------------------------------------------------------------------------


def midnight(d: date) -> datetime:
    return datetime(d.year, d.month, d.day)


def days_span(first: date, stop: date) -> TimeSpan:
    """Whole days ``first`` .. ``stop`` (exclusive)."""
    return TimeSpan(midnight(first), midnight(stop))


def day_span(d: date) -> TimeSpan:
    return days_span(d, d + timedelta(days=1))


def add_months(year: int, month: int, k: int) -> tuple[int, int]:
    n = year * 12 + (month - 1) + k
    return n // 12, n % 12 + 1


def shift_months(d: date, k: int) -> date:
    """``d`` moved by ``k`` calendar months, the day clamped to the month's length."""
    y, m = add_months(d.year, d.month, k)
    nxt_y, nxt_m = add_months(y, m, 1)
    last = (date(nxt_y, nxt_m, 1) - timedelta(days=1)).day
    return date(y, m, min(d.day, last))


def month_span(year: int, month: int) -> TimeSpan:
    y2, m2 = add_months(year, month, 1)
    return TimeSpan(datetime(year, month, 1), datetime(y2, m2, 1))


def year_span(year: int) -> TimeSpan:
    return TimeSpan(datetime(year, 1, 1), datetime(year + 1, 1, 1))


def week_start(d: date) -> date:
    return d - timedelta(days=d.weekday())
