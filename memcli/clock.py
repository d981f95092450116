"""The one notion of "now" and of the user's time zone.

Everything `mem` stores is naive UTC. A user speaks in local time: natural-language times
("yesterday 5pm") are read in the local zone and converted at the edge, and text output shows
local dates. The local zone is $TZ when it names a zone (as the C library reads it), else the
system's /etc/localtime, else the offset the OS reports now.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone, tzinfo
from functools import lru_cache


def utcnow() -> datetime:
    """The current time as naive UTC, to the second (what every stored time looks like)."""
    return datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)


# tzdata's names of plain UTC (no offset, no transitions, ever).
_UTC_NAMES = frozenset(
    f"{prefix}{name}"
    for prefix in ("", "Etc/")
    for name in ("UTC", "UCT", "Universal", "Zulu", "GMT", "GMT0", "GMT+0", "GMT-0", "Greenwich")
)


@lru_cache(maxsize=4)
def _zone_for(tz_env: str | None) -> tuple[tzinfo, bool]:
    """The zone $TZ (or the system) names, and whether it is plain UTC."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if tz_env:
        name = tz_env.lstrip(":")
        try:
            return ZoneInfo(name), name in _UTC_NAMES
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
        # POSIX forms such as "EST5EDT" or "UTC0": the C library understands them, so take
        # the offset it reports now.
        return datetime.now().astimezone().tzinfo or timezone.utc, False
    try:
        with open("/etc/localtime", "rb") as f:
            zone = ZoneInfo.from_file(f, key="localtime")
        # A link to a zone file names it: .../zoneinfo/Etc/UTC
        target = os.path.realpath("/etc/localtime")
        return zone, any(target.endswith("/zoneinfo/" + name) for name in _UTC_NAMES)
    except (OSError, ValueError):
        return datetime.now().astimezone().tzinfo or timezone.utc, False


def local_zone() -> tzinfo:
    """The user's time zone ($TZ respected)."""
    return _zone_for(os.environ.get("TZ"))[0]


def local_to_utc(wall: datetime) -> datetime:
    """A naive local wall-clock time as naive UTC."""
    if wall.tzinfo is not None:
        return wall.astimezone(timezone.utc).replace(tzinfo=None)
    return wall.replace(tzinfo=local_zone()).astimezone(timezone.utc).replace(tzinfo=None)


def utc_to_local(when: datetime) -> datetime:
    """A naive UTC time as naive local wall-clock time (for display). A time within a day of
    the ends of datetime's range (year 1 or 9999) stays as it is: shifted, it would not exist."""
    zone, is_utc = _zone_for(os.environ.get("TZ"))
    if is_utc:  # most servers: nothing to shift (recall converts hundreds of times a query)
        return when
    try:
        return when.replace(tzinfo=timezone.utc).astimezone(zone).replace(tzinfo=None)
    except OverflowError:
        return when


def local_offset(when: datetime) -> timedelta:
    """The local zone's offset from UTC at the naive UTC time `when`."""
    return when.replace(tzinfo=timezone.utc).astimezone(local_zone()).utcoffset() or timedelta(0)


def local_text(when: datetime | str | None) -> str | None:
    """A stored instant (naive UTC, or its ISO text) as the user's local time with its
    offset, for text output: "2026-03-22 05:00:00+09:00". None stays None."""
    if when is None:
        return None
    if isinstance(when, str):
        when = datetime.fromisoformat(when)
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc).replace(tzinfo=None)
    try:
        shown = when.replace(tzinfo=timezone.utc).astimezone(local_zone())
    except OverflowError:  # within a day of datetime's range: shown as it is, in UTC
        shown = when.replace(tzinfo=timezone.utc)
    return shown.isoformat(sep=" ", timespec="seconds")


def local_day(when: datetime | str | None) -> str:
    """A stored instant's day in the user's time zone ("2026-02-28"), for text output;
    "" for None."""
    text = local_text(when)
    return text[:10] if text else ""
