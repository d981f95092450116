"""Dates and periods: reading user timestamps, dating facts, and finding a query's time window.

parse.py reads English and instants, cjk.py Chinese, Japanese and Korean (when the English
scan finds nothing), spans.py holds the spans and the calendar arithmetic both share.

Three jobs, one vocabulary:

* :func:`parse_when` reads a single instant the user (``--at``, ``--now``) or an input file
  (JSONL ``timestamp``) gives us: ISO 8601 and epoch seconds (UTC), and natural language
  through dateparser (the user's local time, converted to UTC). Benchmark session formats are
  read by their loaders in memcli/bench/.
* :func:`extract_fact_time` finds the period a fact talks about ("last spring", "in 2015",
  "3 days ago") and resolves it against when the fact was said.
* :func:`parse_query_window` finds the period a search query asks about ("what did I do last
  week?"), resolved against ``now``.

Fact dating runs on every retained fact, so it is built for speed and for not inventing dates:
one precompiled regex finds candidate spans, each candidate is checked against its context, and
the resolution is our own calendar arithmetic (no dateparser on free text). A bare number is a
year only after a word like "in" / "since" or next to a month or season, and only in 1900..2100
("port 9077", "I have 2015 stamps" are not dates); "may", "march", "sun", "we" are never dates
without a date context.

Conventions (shared with the rest of ``mem``):

* All datetimes are naive and mean UTC; aware inputs are converted to UTC, then made naive.
* A :class:`TimeSpan` is half-open: ``start <= t < end``. The day 2023-05-07 is
  ``2023-05-07T00:00 .. 2023-05-08T00:00``; "in 2015" is ``2015-01-01 .. 2016-01-01``.
* Weeks start on Monday (ISO 8601). A weekend is Saturday 00:00 .. Monday 00:00.
* Seasons are northern-hemisphere meteorological seasons: spring = March..May, summer =
  June..August, autumn/fall = September..November, winter Y = December Y .. end of February Y+1.
"""

from memcli.timeparse.parse import (
    OPEN_START,
    asks_when,
    extract_fact_time,
    parse_query_window,
    parse_when,
    query_window_phrase,
)
from memcli.timeparse.spans import TimeSpan, to_utc_naive

__all__ = [
    "OPEN_START",
    "TimeSpan",
    "asks_when",
    "extract_fact_time",
    "parse_query_window",
    "parse_when",
    "query_window_phrase",
    "to_utc_naive",
]
