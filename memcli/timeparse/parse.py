"""The English scanner of dates and periods, and parse_when (see the package docstring)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from typing import Any

from memcli.timeparse.spans import (
    TimeSpan,
    add_months,
    day_span,
    days_span,
    midnight,
    month_span,
    shift_months,
    to_utc_naive,
    week_start,
    year_span,
)

#: Start used for open-ended query windows such as "before 2020" (there is no earlier memory).
OPEN_START = datetime(1900, 1, 1)
MIN_YEAR = 1900
MAX_YEAR = 2100


def _utcnow() -> datetime:
    from memcli.clock import utcnow

    return utcnow()


_SEASON_MONTH = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}


def _season(name: str, year: int) -> TimeSpan:
    """Season ``name`` labelled by the year it starts in (winter 2022 = Dec 2022..Feb 2023)."""
    first = _SEASON_MONTH[name]
    y2, m2 = add_months(year, first, 3)
    return TimeSpan(datetime(year, first, 1), datetime(y2, m2, 1))


def _distance(span: TimeSpan, when: datetime) -> float:
    """Seconds from `when` to the span (0 inside it)."""
    if when < span.start:
        return (span.start - when).total_seconds()
    if when >= span.end:
        return (when - span.end).total_seconds()
    return 0.0


def _season_label(name: str, d: date) -> int:
    """Label year of the instance of season ``name`` that is current or most recent at ``d``."""
    first = _SEASON_MONTH[name]
    return d.year if d.month >= first else d.year - 1


def _thirds(span: TimeSpan, which: str) -> TimeSpan:
    """Early / mid / late part of a month, year, season or decade."""
    if span.days <= 31.5:  # a month: 1-10, 11-20, 21-end
        s = span.start
        if which == "early":
            return TimeSpan(s, s + timedelta(days=10))
        if which == "mid":
            return TimeSpan(s + timedelta(days=10), s + timedelta(days=20))
        return TimeSpan(s + timedelta(days=20), span.end)
    months = round(span.days / 30.44)
    third = max(1, months // 3)
    y, m = span.start.year, span.start.month
    if which == "early":
        return TimeSpan(span.start, datetime(*add_months(y, m, third), 1))
    if which == "mid":
        return TimeSpan(
            datetime(*add_months(y, m, third), 1), datetime(*add_months(y, m, months - third), 1)
        )
    return TimeSpan(datetime(*add_months(y, m, months - third), 1), span.end)


_PART_OF_DAY = {"morning": (5, 12), "afternoon": (12, 18), "evening": (18, 24), "night": (18, 24)}


def _part_of_day(d: date, part: str) -> TimeSpan:
    lo, hi = _PART_OF_DAY[part]
    base = midnight(d)
    return TimeSpan(base + timedelta(hours=lo), base + timedelta(hours=hi))


# --------------------------------------------------------------------------------------------
# Vocabulary and the candidate regex
# --------------------------------------------------------------------------------------------

_MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_WEEKDAYS = {
    "monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3,
    "friday": 4, "saturday": 5, "sunday": 6,
}  # fmt: skip
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
}  # fmt: skip
# Vague counts as (fewest, most) units: "a few days ago" = 2..4 days ago.
_FUZZY_COUNTS = {"couple": (2, 3), "few": (2, 4), "several": (3, 7), "some": (2, 7)}

_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?(?!\w)(?!['’]s\b)"
)
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_DAYNUM = r"(?:3[01]|[12]\d|0?[1-9])(?:st|nd|rd|th)?(?![\w:])"
_YEAR = r"(?<![\w$€£#@/:.])(?:19\d\d|20\d\d|2100)(?![\w'’%]|[-/.:]\d)"
_NUMWORD = "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))
_SEASON = r"(?:spring|summer|autumn|fall|winter)"
_PARTS = r"(?:morning|afternoon|evening|night)"
_RANGE_ITEM = (
    rf"(?:the\s+)?(?:{_DAYNUM}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?"
    rf"|{_MONTH}(?:\s+{_DAYNUM})?(?:,?\s+{_YEAR})?|{_YEAR})"
)

# Words a candidate can start with: other word starts are not worth trying the pattern at.
_STARTS = (
    r"between|from|the|day|yesterday|today|tonight|tomorrow|last|this|earlier"
    r"|in|of|next|since|until|till|by|during|before|after|around|through|throughout"
    r"|circa|on|at|starting|ending|early|mid|late|end|beginning|start|middle|over|past|coming"
    r"|ca|c|as|a|an|couple|few|several|some|later|previous|within|for|spring|summer|autumn"
    r"|fall|winter|monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february"
    r"|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr"
    r"|jun|jul|aug|sep|sept|oct|nov|dec|springtime|summertime|wintertime|" + _NUMWORD
)
_CANDIDATES_PATTERN = rf"""
    (?<![\w'’])
    (?:
    (?P<rng>\b(?P<rng_pre>between|from)\s+(?P<rng_a>{_RANGE_ITEM})
        \s*(?:and|to|through|thru|until|till|-|–|—)\s*(?P<rng_b>{_RANGE_ITEM}))
  | (?P<rngd>(?P<rngd_a>(?:{_MONTH}\s+{_DAYNUM}|{_DAYNUM}\s+(?:of\s+)?{_MONTH})(?:,?\s+{_YEAR})?)
        \s*(?:to|through|thru|until|till|-|–|—)\s*
        (?P<rngd_b>{_MONTH}\s+{_DAYNUM}(?:,?\s+{_YEAR})?|{_DAYNUM}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?
        |(?P<rngd_day>{_DAYNUM})(?:,?\s+{_YEAR})?))
  | (?P<iso>(?<![\w/.-])(?P<iso_y>\d{{4}})(?P<iso_sep>[-/])(?P<iso_m>\d{{1,2}})(?P=iso_sep)
        (?P<iso_d>\d{{1,2}})(?![\d/]|[-.]\d|[a-su-z]))
  | (?P<us>(?<![\w/.-])(?P<us_a>\d{{1,2}})/(?P<us_b>\d{{1,2}})/(?P<us_y>\d{{4}})(?![\w/]|[-.]\d))
  | (?P<rel>\b(?P<rel_w>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow
        |day\s+before\s+yesterday|day\s+after\s+tomorrow|yesterday|today|tonight|tomorrow
        |last\s+night|this\s+morning|this\s+afternoon|this\s+evening|earlier\s+today
        |the\s+other\s+day)(?!\w)
        (?:\s+(?P<rel_part>{_PARTS})(?!\w))?)
  | (?P<wdb>\bthe\s+(?P<wdb_u>{_WEEKDAY}|day|week|weekend)\s+(?P<wdb_dir>before|after|of)
        \s+(?P<wdb_item>{_RANGE_ITEM}))
  | (?P<bef>\bthe\s+(?P<bef_u>day|night|week|weekend|month|year)\s+before
        (?:\s+(?P<bef_last>last)(?!\w)
          |(?!\w)(?!\s+(?:the|my|his|her|our|their|your|a|an|that|this|we|i|he|she|they|it)\b)
           (?!\s+(?-i:[A-Z0-9]))))
  | (?P<mon>(?:\b(?P<mon_pre>in|of|last|next|this|since|until|till|by|during|before|after
            |around|from|through|throughout|circa|on|starting|ending)\s+)?
        (?:\b(?P<mon_wd>{_WEEKDAY}),?\s+)?
        (?:\b(?P<mon_mod>early|mid|late|(?:the\s+)?(?:end|beginning|start|middle)\s+of)[\s-]+)?
        (?:\b(?:the\s+)?(?P<mon_d1>{_DAYNUM})\s+(?:of\s+)?)?
        \b(?P<mon_m>{_MONTH})
        (?:\s+(?:the\s+)?(?P<mon_d2>{_DAYNUM}))?
        (?:,?\s+(?P<mon_y>{_YEAR}))?)
  | (?P<sea>(?:\b(?P<sea_pre>this\s+past|this\s+coming|the\s+past|in|during|over|through
            |throughout|since|until|till|before|after|last|this|next|past|coming)\s+)?
        (?:\b(?P<sea_the>the)\s+)?
        (?:\b(?P<sea_mod>early|mid|late)[\s-]+)?
        \b(?P<sea_s>{_SEASON})(?:time)?(?!\w)
        (?:\s+(?:of\s+)?(?P<sea_y>{_YEAR}))?)
  | (?P<dec>(?:\b(?P<dec_pre>in|during|since|through|throughout|of|from|until)\s+)?
        (?:\bthe\s+)?(?:\b(?P<dec_mod>early|mid|late)[\s-]+)?
        (?:\b(?P<dec_4>(?:19|20)\d0)|(?<!\w)['’](?P<dec_2>\d0))s(?!\w))
  | (?P<yr>(?:\b(?P<yr_pre>in|since|by|of|from|during|until|till|before|after|around|circa
            |ca\.|c\.|through|throughout|the\s+year|as\s+of|starting|ending)\s+)?
        (?:\b(?P<yr_mod>early|mid|late|(?:the\s+)?(?:end|beginning|start|middle)\s+of)[\s-]+)?
        (?P<yr_y>{_YEAR}))
  | (?P<ago>\b(?P<ago_n>\d{{1,3}}|{_NUMWORD}|a\s+couple\s+of|a\s+couple|couple\s+of|a\s+few
            |few|several|some)
        \s+(?:more\s+)?(?P<ago_u>day|week|weekend|month|year|decade)s?
        \s+(?P<ago_dir>ago|back|from\s+now)(?!\w))
  | (?P<ur>\b(?P<ur_pre>earlier\s+this|later\s+this|this\s+past|this\s+coming
            |(?:in|over|during|within|for)\s+the\s+(?:past|last|next|coming)
            |the\s+past|the\s+last|the\s+previous|the\s+coming|the\s+next|the\s+following
            |last|past|previous|this|next|coming)
        \s+(?:(?P<ur_n>\d{{1,3}}|{_NUMWORD}|few|couple\s+of)\s+)?
        (?P<ur_u>day|week|weekend|month|year)(?P<ur_pl>s)?(?!\w)(?!\s+of\b))
  | (?P<wd>\b(?:(?P<wd_pre>this\s+past|this\s+coming|last|this|next|on|past|coming|until|till
            |since|by|before|after)\s+)?
        (?P<wd_w>{_WEEKDAY})(?!\w)(?!\s+{_PARTS}s\b)(?:\s+(?P<wd_part>{_PARTS})(?!\w))?)
  | (?P<wk>\b(?P<wk_pre>on|over|during|at|for|this\s+past|the\s+past)\s+the\s+weekend(?!\w))
    )"""


@lru_cache(maxsize=1)
def _candidates() -> re.Pattern:
    """The candidate regex, compiled on first use: compiling it takes ~30 ms, and most
    queries (and most facts) have no time word, so they never need it."""
    return re.compile(_CANDIDATES_PATTERN, re.IGNORECASE | re.VERBOSE)


# Every candidate above contains one of these words or a number. Most facts contain none, so
# a split into words and a set lookup let them skip the big pattern; the others try it only at
# the few word starts just before each such word.
_TRIGGER_WORDS = frozenset(
    """
    yesterday today tonight tomorrow night morning afternoon evening day days week weeks
    weekend weekends month months year years decade decades monday tuesday
    wednesday thursday friday saturday sunday spring summer autumn fall winter springtime
    summertime wintertime january february march april may june july august september october
    november december jan feb mar apr jun jul aug sep sept oct nov dec
    """.split()
)
_WORD_RX = re.compile(r"['’]?[^\W_]+")
_START_WORDS = frozenset(_STARTS.split("|"))
_LOOKBACK_WORDS = 6  # "during the past couple of weeks": the candidate starts 5 words back
_KINDS = (
    "rng", "rngd", "iso", "us", "rel", "wdb", "bef", "mon", "sea", "dec", "yr", "ago", "ur",
    "wd", "wk",
)  # fmt: skip

_YEAR_TAIL_RX = re.compile(rf"({_YEAR})\s*$")
# Right after a date, a four-digit number that is no year we read (outside 1900..2100, so the
# candidate did not take it): "March 3, 1850", "1 June 2101". Its day is not given the year
# nearest to when it was said; it is no date.
# Only after a month or a day of one (the forms a year follows), only a number that reads as
# a year (1000..1899 or 2101..2999, no leading zero), and not a count ("May, 3500 in June"
# is 3,500 of something; "Yesterday 3000 runners" takes no year at all).
_YEAR_OFF_RANGE = re.compile(
    r",?\s+(?:1[0-8]\d\d|210[1-9]|21[1-9]\d|2[2-9]\d\d)(?![\w'’%]|[-/.:,]?\d)"
)
_MONTH_NAMED = re.compile(_MONTH, re.I)
_RANGE_ITEM_RX = re.compile(
    rf"(?:the\s+)?(?:(?P<d1>{_DAYNUM})\s+(?:of\s+)?(?P<m1>{_MONTH})(?:,?\s+(?P<y1>{_YEAR}))?"
    rf"|(?P<m2>{_MONTH})(?:\s+(?P<d2>{_DAYNUM}))?(?:,?\s+(?P<y2>{_YEAR}))?|(?P<y3>{_YEAR}))",
    re.IGNORECASE,
)

# A sentence about the future: yearless dates resolve forwards ("I'll go in May" = next May).
_FUTURE = re.compile(
    r"\b(?:will|shall|won['’]t|gonna|plan(?:s|ning)?\s+to|about\s+to|looking\s+forward"
    r"|can['’]t\s+wait|upcoming|hoping\s+to|appointment|scheduled|booked\s+for|due\s+(?:on|by)"
    r"|(?<!was\s)(?<!were\s)going\s+to\s+(?:be|go|have|do"
    r"|get|make|take|visit|see|start|try|buy|meet|travel|fly|move|watch|attend|host|run|play"
    r"|spend|throw|celebrate))\b|['’]ll\b",
    re.IGNORECASE,
)

# A sentence plainly about the past: common irregular past forms of English and "ago". Not
# "-ed" words: "Decided to book the trip for May 9" is about a coming May.
_PAST = re.compile(
    r"\b(?:was|were|went|did|had|came|saw|met|got|took|spent|ago|used\s+to)\b",
    re.IGNORECASE,
)

# "may" / "march" / "mar" in lower case are almost always the modal verb or a walk: they count
# as months only with a year attached ("may 2023") or after one of these words ("in may").
_AMBIGUOUS_MONTHS = {"may", "march", "mar"}
_LOWERCASE_MONTH_PRE = {"in", "during", "since", "until", "till"}
_MONTH_CONTEXT_PRE = {
    "in", "of", "last", "next", "this", "since", "until", "till", "by", "during", "before",
    "after", "around", "from", "through", "throughout", "circa", "starting", "ending",
}  # fmt: skip
# "from" is not here: "music from the '80s" is about the '80s ("from X to Y" is a range).
_OPEN_AFTER = {"since", "starting", "as of"}  # period runs from X until now
_OPEN_BEFORE = {"before"}  # period ends where X starts
_OPEN_UNTIL = {"until", "till", "by", "ending"}  # period ends where X ends
_OPEN_LATER = {"after"}  # period starts where X ends
_NAME_FOLLOWS = re.compile(r"\s+[A-Z]")


def _norm(s: str | None) -> str:
    return " ".join(s.lower().split()) if s else ""


def _month_number(token: str) -> int:
    return _MONTHS[token.lower().rstrip(".")[:3]]


def _daynum(token: str) -> int:
    return int(re.match(r"\d+", token).group())  # type: ignore[union-attr]


def _count(token: str) -> tuple[int, int] | None:
    """Number of units as (fewest, most): "3" -> (3, 3), "a few" -> (2, 4)."""
    t = _norm(token)
    if t.isdigit():
        n = int(t)
        return (n, n) if n > 0 else None
    if t in _NUMBER_WORDS:
        n = _NUMBER_WORDS[t]
        return n, n
    for word, rng in _FUZZY_COUNTS.items():
        if word in t:
            return rng
    return None


# --------------------------------------------------------------------------------------------
# The scanner
# --------------------------------------------------------------------------------------------


@dataclass
class _Hit:
    span: TimeSpan
    confident: bool = True


class _Scan:
    """Context for resolving candidates of one text against one anchor time."""

    def __init__(self, text: str, anchor: datetime, query: bool) -> None:
        self.text = text
        self.anchor = anchor
        self.today = anchor.date()
        self.query = query
        self._future: bool | None = None
        self._past: bool | None = None

    @property
    def future(self) -> bool:
        """Whether the sentence looks forward in time (decides yearless dates)."""
        if self._future is None:
            self._future = bool(_FUTURE.search(self.text))
        return self._future

    @property
    def looks_back(self) -> bool:
        """A query (which asks about what was) or a sentence plainly in the past tense: its
        yearless dates resolve backwards ("We went to Rome in June", said in May)."""
        if self._past is None:
            self._past = self.query or (not self.future and bool(_PAST.search(self.text)))
        return self._past

    # -- open-ended words ("since May", "before 2020") -----------------------------------------

    def _open(self, span: TimeSpan, pre: str) -> _Hit:
        """Apply since / before / until / after to a resolved period.

        Queries get the open window the words ask for; facts get "since X" as X..now and keep
        the named period itself for the other words, marked not confident (a fact "before
        2020" is not about 2020).
        """
        now = self.anchor
        if pre in _OPEN_AFTER:
            if span.start < now:
                return _Hit(TimeSpan(span.start, now, open_ended=self.query))
            return _Hit(span)
        if not self.query:
            if pre in _OPEN_BEFORE | _OPEN_UNTIL | _OPEN_LATER:
                return _Hit(span, confident=False)
            return _Hit(span)
        if pre in _OPEN_BEFORE:
            if span.start > OPEN_START:
                return _Hit(TimeSpan(OPEN_START, span.start, open_ended=True))
            return _Hit(span)
        if pre in _OPEN_UNTIL:
            return _Hit(TimeSpan(OPEN_START, span.end, open_ended=True))
        if pre in _OPEN_LATER:
            if span.end < now:
                return _Hit(TimeSpan(span.end, now, open_ended=True))
            return _Hit(span, confident=False)
        return _Hit(span)

    # -- yearless dates ---------------------------------------------------------------------

    def _month_year(self, month: int, pre: str) -> int:
        """The year of a month named without one, as its words and tense suggest."""
        t = self.today
        if pre == "last":
            return t.year if month < t.month else t.year - 1
        if pre == "next":
            return t.year if month > t.month else t.year + 1
        if pre == "this":
            return t.year
        if self.future:
            return t.year if month >= t.month else t.year + 1
        if self.looks_back:
            return t.year if month <= t.month else t.year - 1
        # The year that puts the month nearest to when it was said: "in April", said in
        # February, is the coming April; said in October, the one just gone.
        years = (t.year - 1, t.year, t.year + 1)
        return min(years, key=lambda y: abs((y - t.year) * 12 + month - t.month))

    def _day_year(self, month: int, day: int) -> int:
        """The year of "May 7" without one: the one that puts it nearest to when it was said;
        the earliest not before that day in a sentence about the future, the latest not after
        it in a query or a sentence plainly about the past."""
        t = self.today
        candidates = []
        for y in range(t.year - 8, t.year + 9):  # 29 February may be up to 8 years away
            try:
                candidates.append(date(y, month, day))
            except ValueError:
                continue
        if not candidates:
            return t.year
        if self.future:
            ahead = [d for d in candidates if d >= t]
            return min(ahead).year if ahead else t.year
        if self.looks_back:
            behind = [d for d in candidates if d <= t]
            return max(behind).year if behind else t.year
        return min(candidates, key=lambda d: (abs((d - t).days), d > t)).year

    # -- handlers, one per candidate kind ------------------------------------------------------

    def rng(self, m: re.Match[str]) -> _Hit | None:
        a = _RANGE_ITEM_RX.fullmatch(m.group("rng_a"))
        b = _RANGE_ITEM_RX.fullmatch(m.group("rng_b"))
        if not a or not b:
            return None
        pa, pb = _range_item(a), _range_item(b)
        if pa is None or pb is None:
            return None
        return self._range_hit(pa, pb)

    def rngd(self, m: re.Match[str]) -> _Hit | None:
        """A range of two days with no "from" / "between": "April 4 to April 18", "4-18 May"."""
        a = _RANGE_ITEM_RX.fullmatch(m.group("rngd_a"))
        pa = _range_item(a) if a else None
        if pa is None:
            return None
        if m.group("rngd_day"):
            tail = _YEAR_TAIL_RX.search(m.group("rngd_b"))
            pb = (int(tail.group(1)) if tail else None, pa[1], _daynum(m.group("rngd_day")))
        else:
            b = _RANGE_ITEM_RX.fullmatch(m.group("rngd_b"))
            pb = _range_item(b) if b else None
            if pb is None:
                return None
        return self._range_hit(pa, pb)

    def _range_hit(
        self,
        pa: tuple[int | None, int | None, int | None],
        pb: tuple[int | None, int | None, int | None],
    ) -> _Hit | None:
        (ya, ma, da), (yb, mb, db) = pa, pb
        if ya is None and yb is None:
            if ma is None or mb is None:
                return None
            yb = self._day_year(mb, db) if db else self._month_year(mb, "in")
            ya = yb if (ma, da or 1) <= (mb, db or 31) else yb - 1
        elif ya is None:
            ya = yb if (ma or 1, da or 1) <= (mb or 12, db or 31) else yb - 1  # type: ignore[operator]
        elif yb is None:
            yb = ya if (ma or 1, da or 1) <= (mb or 12, db or 31) else ya + 1
        try:
            first = _item_span(ya, ma, da)
            last = _item_span(yb, mb, db)  # type: ignore[arg-type]
        except ValueError:
            return None
        if last.end <= first.start:
            return None
        return _Hit(TimeSpan(first.start, last.end))

    def iso(self, m: re.Match[str]) -> _Hit | None:
        return _date_hit(int(m.group("iso_y")), int(m.group("iso_m")), int(m.group("iso_d")))

    def us(self, m: re.Match[str]) -> _Hit | None:
        a, b, y = int(m.group("us_a")), int(m.group("us_b")), int(m.group("us_y"))
        month, day = (b, a) if a > 12 else (a, b)  # US month/day unless that is impossible
        return _date_hit(y, month, day)

    def rel(self, m: re.Match[str]) -> _Hit | None:
        word = _norm(m.group("rel_w"))
        part = _norm(m.group("rel_part"))
        t = self.today
        if word == "the other day":
            return _Hit(days_span(t - timedelta(days=7), t), confident=False)
        if word == "last night":
            return _Hit(_part_of_day(t - timedelta(days=1), "night"))
        if word.startswith("this "):
            return _Hit(_part_of_day(t, word.split()[1]))
        if word == "tonight":
            return _Hit(_part_of_day(t, "night"))
        offset = {
            "yesterday": -1, "today": 0, "earlier today": 0, "tomorrow": 1,
            "the day before yesterday": -2, "day before yesterday": -2,
            "the day after tomorrow": 2, "day after tomorrow": 2,
        }[word]  # fmt: skip
        d = t + timedelta(days=offset)
        return _Hit(_part_of_day(d, part) if part else day_span(d))

    def wdb(self, m: re.Match[str]) -> _Hit | None:
        """ "the Sunday before 25 May 2023", "the week of May 7", "the day after May 7"."""
        item = _RANGE_ITEM_RX.fullmatch(m.group("wdb_item"))
        parts = _range_item(item) if item else None
        if parts is None or parts[1] is None or parts[2] is None:
            return None
        year, month, day = parts
        try:
            d = date(year if year else self._day_year(month, day), month, day)
        except ValueError:
            return None
        unit = m.group("wdb_u").lower()
        direction = m.group("wdb_dir").lower()
        if unit in _WEEKDAYS:
            target = _WEEKDAYS[unit]
            if direction == "before":
                d = d - timedelta(days=(d.weekday() - target) % 7 or 7)
            elif direction == "after":
                d = d + timedelta(days=(target - d.weekday()) % 7 or 7)
            else:
                d = week_start(d) + timedelta(days=target)
            return _Hit(day_span(d))
        if unit == "day":
            if direction == "of":
                return _Hit(day_span(d))
            return _Hit(day_span(d + timedelta(days=-1 if direction == "before" else 1)))
        if unit == "week":
            if direction == "of":
                ws = week_start(d)
                return _Hit(days_span(ws, ws + timedelta(days=7)))
            if direction == "before":
                return _Hit(days_span(d - timedelta(days=7), d))
            return _Hit(days_span(d + timedelta(days=1), d + timedelta(days=8)))
        # weekend: the Saturday..Monday before / after / around the day
        if direction == "before":  # the latest weekend over by the day
            sat = d - timedelta(days=(d.weekday() - 5) % 7)
            if sat + timedelta(days=2) > d:
                sat -= timedelta(days=7)
        elif direction == "after":
            sat = d + timedelta(days=(5 - d.weekday()) % 7 or 7)
        else:
            sat = week_start(d) + timedelta(days=5)
        return _Hit(days_span(sat, sat + timedelta(days=2)))

    def bef(self, m: re.Match[str]) -> _Hit | None:
        unit = m.group("bef_u").lower()
        back = 2 if m.group("bef_last") else 1
        return _Hit(self._calendar_unit("day" if unit == "night" else unit, -back))

    def mon(self, m: re.Match[str]) -> _Hit | None:
        token = m.group("mon_m")
        pre = _norm(m.group("mon_pre"))
        mod = _norm(m.group("mon_mod"))
        d1, d2, y = m.group("mon_d1"), m.group("mon_d2"), m.group("mon_y")
        day_token = d1 or d2
        if not _month_in_context(token, pre, mod, bool(day_token), bool(y)):
            return None
        month = _month_number(token)
        if day_token:
            day = _daynum(day_token)
            year = int(y) if y else self._day_year(month, day)
            hit = _date_hit(year, month, day)
            if hit is None or pre not in _OPEN_AFTER | _OPEN_BEFORE | _OPEN_UNTIL | _OPEN_LATER:
                return hit
            return self._open(hit.span, pre)
        year = int(y) if y else self._month_year(month, pre)
        span = month_span(year, month)
        if mod:
            span = _thirds(span, _mod_word(mod))
        return self._open(span, pre)

    def sea(self, m: re.Match[str]) -> _Hit | None:
        name = m.group("sea_s").lower()
        pre = _norm(m.group("sea_pre"))
        the = bool(m.group("sea_the"))
        mod = _norm(m.group("sea_mod"))
        y = m.group("sea_y")
        relative = pre in ("last", "this", "next", "past", "this past", "this coming", "coming",
                           "the past")  # fmt: skip
        if not y and not pre and not mod:
            return None  # a bare "summer" or "fall" (the verb) is not a date
        if not y and m.group("sea_s")[0].isupper() and _NAME_FOLLOWS.match(self.text, m.end()):
            return None  # "the Spring Fling Market", "the Summer Olympics": a name
        if name == "fall" and not y and not relative and not the:
            return None  # "in fall" is too often "fall" the verb
        t = self.today
        if y:
            span = _season(name, int(y))
        else:
            label = _season_label(name, t)  # current or most recent instance
            current = _season(name, label)
            if pre in ("last", "past", "this past", "the past"):
                span = current if current.end <= self.anchor else _season(name, label - 1)
            elif pre in ("next", "coming", "this coming"):
                span = _season(name, label + 1)
            elif pre == "this":  # the one labelled this year; in Jan/Feb, the running winter
                span = _season(name, t.year if name != "winter" or t.month >= 3 else t.year - 1)
            elif self.future and current.end <= self.anchor:
                span = _season(name, label + 1)
            elif self.looks_back:
                span = current
            else:
                # As a yearless month: the instance nearest to when it was said ("before
                # winter", said in November, is the coming one, not the one that ended in
                # March).
                span = min(
                    (_season(name, label + k) for k in (0, 1)),
                    key=lambda s: _distance(s, self.anchor),
                )
        if mod:
            span = _thirds(span, mod)
        return self._open(span, pre)

    def dec(self, m: re.Match[str]) -> _Hit | None:
        if m.group("dec_4"):
            start = int(m.group("dec_4"))
        else:
            two = int(m.group("dec_2"))
            start = 2000 + two if 2000 + two <= self.today.year else 1900 + two
        if not MIN_YEAR <= start <= MAX_YEAR:
            return None
        span = TimeSpan(datetime(start, 1, 1), datetime(start + 10, 1, 1))
        mod = _norm(m.group("dec_mod"))
        if mod:
            span = _thirds(span, mod)
        return self._open(span, _norm(m.group("dec_pre")))

    def yr(self, m: re.Match[str]) -> _Hit | None:
        pre = _norm(m.group("yr_pre"))
        mod = _norm(m.group("yr_mod"))
        if not pre and not mod:
            return None  # "I have 2015 stamps", "room 2019": a number, not a year
        span = year_span(int(m.group("yr_y")))
        if mod:
            span = _thirds(span, _mod_word(mod))
        return self._open(span, pre)

    def ago(self, m: re.Match[str]) -> _Hit | None:
        count = _count(m.group("ago_n"))
        if count is None:
            return None
        unit = m.group("ago_u").lower()
        sign = 1 if "now" in m.group("ago_dir").lower() else -1
        lo, hi = count
        confident = lo == hi
        if unit == "weekend":
            ws = week_start(self.today)
            if sign < 0:  # 1 weekend ago = last weekend (Sat..Mon before this week)
                first = ws - timedelta(days=2 + 7 * (hi - 1))
                last = ws - timedelta(days=2 + 7 * (lo - 1))
            else:
                first = ws + timedelta(days=5 + 7 * lo)
                last = ws + timedelta(days=5 + 7 * hi)
            return _Hit(days_span(first, last + timedelta(days=2)), confident)
        if unit == "decade":
            unit, lo, hi = "year", lo * 10, hi * 10
        if lo != hi:
            near, far = self._shift(unit, sign * lo), self._shift(unit, sign * hi)
            first, last = min(near, far), max(near, far)
            return _Hit(days_span(first, last + timedelta(days=1)), confident=False)
        centre = self._shift(unit, sign * lo)
        if not MIN_YEAR <= centre.year <= MAX_YEAR:
            return None
        if unit == "day":
            return _Hit(day_span(centre))
        # "2 weeks ago" is the week around that day, "3 months ago" the month around it, ...
        half = {"week": 3, "month": 15, "year": 182}[unit]
        return _Hit(days_span(centre - timedelta(days=half), centre + timedelta(days=half + 1)))

    def ur(self, m: re.Match[str]) -> _Hit | None:
        pre = _norm(m.group("ur_pre"))
        unit = m.group("ur_u").lower()
        count = _count(m.group("ur_n")) if m.group("ur_n") else None
        t = self.today
        rolling = pre.startswith(("in the", "over the", "during the", "within the", "for the"))
        rolling = rolling or pre in ("the past", "the last", "past", "the coming")
        if m.group("ur_pl") and count is None and rolling:
            count = _FUZZY_COUNTS["few"]  # "in the coming weeks", "over the past months"
        rolling = rolling or count is not None
        if pre in ("the previous", "the next", "the following") and count is None:
            return None  # "the next day we ...": relative to a story, not to the anchor
        if unit == "day" and count is None and "past" not in pre:
            return None  # "my last day", "this day" are not dates
        if pre in ("earlier this", "later this"):
            cal = self._calendar_unit(unit, 0)
            if pre == "earlier this":
                stop = max(midnight(t), cal.start + timedelta(days=1))
                return _Hit(TimeSpan(cal.start, min(stop, cal.end)))
            start = min(midnight(t + timedelta(days=1)), cal.end - timedelta(days=1))
            return _Hit(TimeSpan(max(start, cal.start), cal.end))
        forward = any(w in pre for w in ("next", "coming", "following"))
        if rolling and pre not in ("this past", "this coming"):
            lo, hi = count or (1, 1)
            if forward:
                begin = t + timedelta(days=1)
                return _Hit(days_span(begin, self._shift(unit, hi, begin)), confident=lo == hi)
            return _Hit(
                days_span(self._shift(unit, -hi), t + timedelta(days=1)), confident=lo == hi
            )
        if pre in ("last", "previous", "this past"):
            return _Hit(self._calendar_unit(unit, -1))
        if pre in ("next", "coming", "this coming"):
            if unit == "weekend" and pre == "this coming" and t.weekday() < 5:
                return _Hit(self._calendar_unit(unit, 0))
            return _Hit(self._calendar_unit(unit, 1))
        return _Hit(self._calendar_unit(unit, 0))

    def wd(self, m: re.Match[str]) -> _Hit | None:
        pre = _norm(m.group("wd_pre"))
        part = _norm(m.group("wd_part"))
        target = _WEEKDAYS[m.group("wd_w").lower()]
        t = self.today
        back = (t.weekday() - target) % 7 or 7  # days back to the latest one before today
        ahead = (target - t.weekday()) % 7 or 7  # days to the next one after today
        if pre in ("last", "past", "this past"):
            d = t - timedelta(days=back)
        elif pre in ("next", "coming", "this coming"):
            d = t + timedelta(days=ahead)
        elif pre == "this":
            d = week_start(t) + timedelta(days=target)
        elif self.future:
            d = t + timedelta(days=ahead)
        else:
            d = t - timedelta(days=back)
        span = _part_of_day(d, part) if part else day_span(d)
        return self._open(span, pre)

    def wk(self, m: re.Match[str]) -> _Hit | None:
        t = self.today
        ws = week_start(t)
        pre = _norm(m.group("wk_pre"))
        if pre in ("this past", "the past"):
            return _Hit(days_span(ws - timedelta(days=2), ws))
        if t.weekday() >= 5:  # during a weekend, "the weekend" is this one
            return _Hit(days_span(ws + timedelta(days=5), ws + timedelta(days=7)))
        if self.future or pre == "for":  # "any plans for the weekend?" looks ahead
            return _Hit(days_span(ws + timedelta(days=5), ws + timedelta(days=7)))
        return _Hit(days_span(ws - timedelta(days=2), ws), confident=False)

    # -- shared unit arithmetic ------------------------------------------------------------------

    def _shift(self, unit: str, k: int, base: date | None = None) -> date:
        d = base or self.today
        if unit == "day":
            return d + timedelta(days=k)
        if unit in ("week", "weekend"):
            return d + timedelta(days=7 * k)
        if unit == "month":
            return shift_months(d, k)
        return shift_months(d, 12 * k)

    def _calendar_unit(self, unit: str, k: int) -> TimeSpan:
        """The calendar day / week / weekend / month / year ``k`` units from the current one."""
        t = self.today
        if unit == "day":
            return day_span(t + timedelta(days=k))
        if unit == "week":
            ws = week_start(t) + timedelta(days=7 * k)
            return days_span(ws, ws + timedelta(days=7))
        if unit == "weekend":
            sat = week_start(t) + timedelta(days=5 + 7 * k)
            return days_span(sat, sat + timedelta(days=2))
        if unit == "month":
            return month_span(*add_months(t.year, t.month, k))
        return year_span(t.year + k)


def _mod_word(mod: str) -> str:
    """Map "the end of" / "beginning of" / "mid" ... onto early / mid / late."""
    if mod in ("early", "mid", "late"):
        return mod
    if "end" in mod:
        return "late"
    if "middle" in mod:
        return "mid"
    return "early"


def _month_in_context(token: str, pre: str, mod: str, has_day: bool, has_year: bool) -> bool:
    """Is this month word really a month here? ("we may go", "May I ask", "June said")."""
    if token.rstrip(".").lower() in _AMBIGUOUS_MONTHS and token[0].islower():
        return has_year or (pre in _LOWERCASE_MONTH_PRE and not has_day)
    return has_day or has_year or bool(mod) or pre in _MONTH_CONTEXT_PRE


def _date_hit(year: int, month: int, day: int) -> _Hit | None:
    if not MIN_YEAR <= year <= MAX_YEAR:
        return None
    try:
        return _Hit(day_span(date(year, month, day)))
    except ValueError:
        return None


def _range_item(m: re.Match[str]) -> tuple[int | None, int | None, int | None] | None:
    """(year, month, day) of one end of a "between X and Y" range; missing parts are None."""
    if m.group("y3"):
        return int(m.group("y3")), None, None
    token = m.group("m1") or m.group("m2")
    day = m.group("d1") or m.group("d2")
    year = m.group("y1") or m.group("y2")
    if token.rstrip(".").lower() in _AMBIGUOUS_MONTHS and token[0].islower() and not year:
        return None
    return (
        int(year) if year else None,
        _month_number(token),
        _daynum(day) if day else None,
    )


def _item_span(year: int, month: int | None, day: int | None) -> TimeSpan:
    if month is None:
        return year_span(year)
    if day is None:
        return month_span(year, month)
    return day_span(date(year, month, day))


_HABITUAL = {"every", "each", "other"}  # "every other Saturday"
_ANY = {"a", "any", "some"}  # "on a Sunday"
_OPEN_WORDS = _OPEN_AFTER | _OPEN_BEFORE | _OPEN_UNTIL | _OPEN_LATER
_WORD_BEFORE = re.compile(r"([^\W\d_]+)[ \t]+$")


def _word_before(text: str, pos: int) -> str:
    m = _WORD_BEFORE.search(text, max(0, pos - 16), pos)
    return m.group(1).lower() if m else ""


_HAS_YEAR = re.compile(r"\d{4}|['’]\d0s")


def _scan(text: str, anchor: datetime, query: bool) -> TimeSpan | None:
    """The first confident period in ``text`` (else the first tentative one, else None).

    In a query, a period with an explicit year beats a relative one anywhere in the text.
    """
    found = _scan_phrase(text, anchor, query)
    return found[0] if found else None


def _scan_phrase(
    text: str, anchor: datetime, query: bool
) -> tuple[TimeSpan, tuple[int, int]] | None:
    """_scan's period and where in ``text`` the words that name it are (start, end)."""
    words = list(_WORD_RX.finditer(text))
    triggers = [
        i
        for i, w in enumerate(words)
        if w.group()[-1].isdigit()
        or w.group()[0].isdigit()
        or w.group()[1:2].isdigit()  # '90s
        or w.group().lower() in _TRIGGER_WORDS
    ]
    if not triggers:
        return None
    scan = _Scan(text, anchor, query)
    fallback: tuple[TimeSpan, tuple[int, int]] | None = None
    relative: tuple[TimeSpan, tuple[int, int]] | None = None
    match = _candidates().match
    tried = -1  # index of the last word start tried
    consumed = 0  # text before this offset belongs to an accepted candidate
    for t in triggers:
        for i in range(max(tried + 1, t - _LOOKBACK_WORDS), t + 1):
            tried = i
            word = words[i]
            pos = word.start()
            if pos < consumed:
                continue
            first = word.group()
            if not (first[0] in "'’" or first[0].isdigit() or first.lower() in _START_WORDS):
                continue  # no candidate starts with this word
            m = match(text, pos)
            if m is None:
                continue
            hit = None
            for kind in _KINDS:
                if m.group(kind) is not None:
                    try:
                        hit = getattr(scan, kind)(m)
                    except (ValueError, OverflowError):  # "999 decades ago": off the calendar
                        hit = None
                    break
            if hit is not None and kind not in ("rng", "iso", "us"):
                before = _word_before(text, pos)
                if before in _HABITUAL or (kind == "wd" and before in _ANY):
                    hit = None  # "every Saturday", "on a Sunday": a habit, not a date
                elif before in _OPEN_WORDS:
                    hit = scan._open(hit.span, before)  # "since last May", "until next week"
            if (
                hit is not None
                and _MONTH_NAMED.search(m.group())
                and not _HAS_YEAR.search(m.group())
                and _YEAR_OFF_RANGE.match(text, m.end())
            ):
                hit = None  # "March 3, 1850": its year is one we do not read; no other year
            if hit is None:
                continue  # rejected: an overlapping candidate may start at a later word
            consumed = m.end()
            found = (hit.span, (m.start(), m.end()))
            if not hit.confident:
                fallback = fallback or found
            elif not query or _HAS_YEAR.search(m.group()):
                return found
            else:  # a query may pin "last Friday" down later: "... last Friday on 23 May 2022?"
                relative = relative or found
    return relative or fallback


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def extract_fact_time(text: str, mentioned_at: datetime) -> TimeSpan | None:
    """The period a fact talks about, resolved against when it was said, or None.

    "I went hiking yesterday" said on 2023-05-08 -> 2023-05-07 (the whole day). Relative words
    resolve against ``mentioned_at`` (weeks start on Monday); yearless dates take the latest
    such date not after ``mentioned_at``, or the next one when the sentence is about the future
    ("I'll visit in June"). The first confident expression wins; vague ones ("the other day",
    "before 2020") are used only when nothing better is found.
    """
    if not text:
        return None
    anchor = to_utc_naive(mentioned_at)
    return _scan(text, anchor, query=False) or _scan_cjk(text, anchor)


def parse_query_window(query: str, now: datetime) -> TimeSpan | None:
    """The time window a search query asks about, or None when it names no time.

    Same vocabulary as :func:`extract_fact_time`, plus open windows: "since January" is
    Jan 1 .. now, "before 2020" is 1900 .. 2020 (:data:`OPEN_START`), "until March 2023" is
    1900 .. April 2023, "after May 2023" is June 2023 .. now; "between March and May 2023" is
    2023-03-01 .. 2023-06-01. A month without a year ("in May?") is the latest May not after
    now. A period with an explicit year wins over a relative one ("last Friday on 23 January,
    2022" -> that day). "When did Caroline go to Paris?" names no time: None, and so does
    "recently": it is too vague to filter by (recency scoring covers it).
    """
    found = query_window_phrase(query, now)
    return found[0] if found else None


def query_window_phrase(query: str, now: datetime) -> tuple[TimeSpan, tuple[int, int]] | None:
    """parse_query_window's window and where in the query the words that name it are
    (start, end: "last week", "上周")."""
    if not query:
        return None
    anchor = to_utc_naive(now)
    found = _scan_phrase(query, anchor, query=True)
    if found:
        return found
    if not _CJK_LETTER.search(query):
        return None
    from memcli.timeparse.cjk import scan_cjk_phrase

    return scan_cjk_phrase(query, anchor)


# A question that asks for a time or a span of time ("When did ...", "What year ...", "How
# long have I ...", "How many days passed between ...": its answer is in the memories that
# say when; 什么时候, 哪一年, 几点; いつ, 何時; 언제): the English question word opening the
# question (a "when" inside one is a clause: "what did I say when we met?"), the others
# anywhere.
_ASKS_WHEN = re.compile(
    r"^\W*when\b|\b(?:what|which)\s+(?:time|date|day|year|month)\b|\bhow\s+long\b"
    r"|\bhow\s+many\s+(?:days|weeks|months|years)\b"
    r"|什么时候|什麼時候|几点|幾點|哪天|哪一天|哪年|哪一年|几月|幾月|何時|いつ|언제",
    re.IGNORECASE,
)


def asks_when(query: str) -> bool:
    """Whether the query asks for a time: its answer is a memory that says one."""
    return _ASKS_WHEN.search(query) is not None


# Kana, CJK ideographs (with extension A and compatibility forms) and Hangul.
_CJK_LETTER = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def _scan_cjk(text: str, anchor: datetime) -> TimeSpan | None:
    """Chinese, Japanese and Korean date words (memcli/timeparse/cjk.py), when the English
    scan found nothing. Text with no CJK letter has none, and most text is that: it skips
    the module (its import compiles ~50 ms of patterns) and the scan."""
    if not _CJK_LETTER.search(text):
        return None
    from memcli.timeparse.cjk import scan_cjk

    return scan_cjk(text, anchor)


# -- parse_when -------------------------------------------------------------------------------

_ISO_RX = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})(?:-(?P<d>\d{2})"
    r"(?:[T ](?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d{1,9}))?)?)?)?"
    r"\s*(?P<tz>Z|[+-]\d{2}(?::?\d{2})?)?",
    re.IGNORECASE,
)
_NUMBER_RX = re.compile(r"[+-]?\d+(?:\.\d+)?")
# Words that make a string plausibly a date for dateparser (so "we" or "sun" are refused).
_DATE_WORDS = re.compile(
    r"\d|\b(?:now|today|tonight|yesterday|tomorrow|ago|noon|midnight|morning|afternoon|evening"
    r"|night|week|weekend|month|year|day|hour|minute|second|last|next|this|monday|tuesday"
    r"|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june|july"
    r"|august|september|october|november|december|spring|summer|autumn|fall|winter)s?\b",
    re.IGNORECASE,
)


def _tz_offset(tz: str | None) -> timedelta:
    """An ISO offset ("+05:30", "-08", "Z"); ValueError for one no zone has (+25:00)."""
    if not tz or tz.upper() == "Z":
        return timedelta(0)
    sign = -1 if tz[0] == "-" else 1
    digits = tz[1:].replace(":", "")
    hours = int(digits[:2])
    minutes = int(digits[2:4]) if len(digits) > 2 else 0
    if hours > 23 or minutes > 59:
        raise ValueError(f"no time zone is {tz} from UTC")
    return sign * timedelta(hours=hours, minutes=minutes)


def _parse_iso(text: str) -> datetime | None:
    m = _ISO_RX.fullmatch(text)
    if not m:
        return None
    g = m.groupdict()
    frac = (g["f"] or "0")[:6].ljust(6, "0")
    when = datetime(
        int(g["y"]), int(g["mo"]), int(g["d"] or 1),
        int(g["h"] or 0), int(g["mi"] or 0), int(g["s"] or 0), int(frac),
    )  # fmt: skip
    if g["h"] is None and not g["tz"]:
        return _local_day_start(when)
    return when - _tz_offset(g["tz"])


def _local_day_start(day: datetime) -> datetime:
    """A date without a time of day ("2026-03-10", "2026-03", "2026") as the start of that
    day on the user's calendar, in UTC: a date names a day, as "March 10 2026" does (read
    as UTC midnight it was the evening before west of UTC). A time of day without an offset
    stays UTC (a machine's timestamp). At the first day of the calendar, as it is."""
    from memcli.clock import local_to_utc

    try:
        return local_to_utc(day)
    except OverflowError:
        return day


def _parse_formats(text: str) -> datetime | None:
    """Fixed formats, no dateparser: numbers and ISO 8601, UTC unless they say; a date
    without a time is a day of the user's calendar (_local_day_start)."""
    if _NUMBER_RX.fullmatch(text):
        digits = text.lstrip("+-").split(".")[0]
        if len(digits) == 4:  # a bare year
            return _local_day_start(datetime(int(digits), 1, 1))
        if len(digits) == 8 and "." not in text:  # 20230507
            return _local_day_start(datetime(int(text[:4]), int(text[4:6]), int(text[6:8])))
        value = float(text)
        if abs(value) >= 1e11:  # epoch milliseconds (JavaScript's Date.now())
            value /= 1000.0
        return datetime(1970, 1, 1) + timedelta(seconds=value)
    iso = _parse_iso(text)
    if iso is not None:
        return iso
    return None


@lru_cache(maxsize=1)
def _dateparser() -> Any:
    import dateparser  # slow import (about 0.1 s): only when natural language is given

    return dateparser


# Numbers dateparser reads as something else rather than refuse: an hour past 12 before
# am/pm ("25pm" was 01:00), an hour past 24 or a minute past 59, a day past 31 after a month
# ("March 32" was March 1932), a negative count before "ago" ("-5 days ago" was 5 days ago),
# and a day of the month with no month ("the 5th" was May, the fifth month).
_MONTH_NAME = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?"
)
_NAMES_A_MONTH = re.compile(r"\b" + _MONTH_NAME, re.IGNORECASE)
_HOUR = r"(?<![:.\d])"  # a number that starts a time: not the minutes of "14:35" or "3.30pm"
_BAD_DAY = r"(?:3[2-9]|[4-9]\d)(?:st|nd|rd|th)?\b"
_MISREAD = re.compile(
    rf"{_HOUR}(?:0|1[3-9]|[2-9]\d)\s*[ap]\.?m\b"
    rf"|{_HOUR}(?:2[5-9]|[3-9]\d):\d{{2}}\b|{_HOUR}24:(?!00\b)\d{{2}}\b"
    rf"|{_HOUR}\d{{1,2}}:[6-9]\d\b"
    rf"|\b{_MONTH_NAME}\s+{_BAD_DAY}|\b{_BAD_DAY}\s+(?:of\s+)?{_MONTH_NAME}"
    r"|-\s*\d+\s*(?:second|minute|hour|day|week|month|year)s?\s+ago\b"
    r"|^(?:the\s+)?\d{1,2}(?:st|nd|rd|th)$",
    re.IGNORECASE,
)
# What may follow the words of a date phrase that ends the input: spaces and punctuation,
# not words ("2 weeks ago potato" is no time).
_NOT_WORDS = re.compile(r"[\s.,;:!?()'\"-]*")


# An ISO date and "noon" or "midnight": local time of that day.
_DAY_AND_HOUR_WORD = re.compile(
    r"(?P<day>\d{4}-\d{2}-\d{2})\s+(?:at\s+)?(?P<word>noon|midnight)", re.I
)


def parse_when(text: str, now: datetime | None = None) -> datetime:
    """Read one instant given by a user option or an input file, as naive UTC.

    Accepts ISO 8601 dates and datetimes (naive datetimes are UTC; ``Z`` or offsets are
    converted; a date alone is that day on the user's calendar),
    epoch seconds (milliseconds when the number is that large), a bare year, and anything
    dateparser reads ("yesterday", "3 days ago", "last friday 5pm", "8 May 2023 1:56 pm"),
    which is in the user's local time zone (``$TZ``) and relative to ``now`` (default: the
    current time). Relative phrases keep the time of day of ``now`` unless they name one, as
    dateparser does ("yesterday" = now - 24 h). Raises ValueError on anything else.
    """
    raw = text
    text = text.strip() if isinstance(text, str) else ""
    error = ValueError(f"cannot read {raw!r} as a date/time")
    if not text:
        raise error
    try:
        fixed = _parse_formats(text)
    except (ValueError, OverflowError):
        raise error from None
    if fixed is not None:
        return fixed
    try:  # anything else Python itself can read as ISO (e.g. "2023-05-07T16:07:00.5+0530")
        return to_utc_naive(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        pass
    if not _DATE_WORDS.search(text):
        raise error  # "we", "sun", "xyz": dateparser would turn some of these into weekdays
    if _MISREAD.search(text) or any(unicodedata.category(ch) == "Cc" for ch in text):
        raise error
    named = _DAY_AND_HOUR_WORD.fullmatch(text)
    if named:  # dateparser gave "2026-03-12 noon" the current day of the month
        from memcli.clock import local_to_utc

        try:
            day = datetime.fromisoformat(named["day"])
            return local_to_utc(day.replace(hour=12 if named["word"].lower() == "noon" else 0))
        except (ValueError, OverflowError):
            raise error from None
    # Natural language is the user's own clock: "yesterday 5pm" is 17:00 local time, stored
    # as UTC. dateparser gets the local wall-clock now and returns local wall-clock time
    # (or an aware value when the text names a zone: "5pm EST").
    from memcli.clock import local_to_utc, utc_to_local

    base = utc_to_local(to_utc_naive(now) if now is not None else _utcnow())
    # TIMEZONE "UTC": dateparser reads the wall clock it is given as it is, without its own
    # lookup of the local zone, which failed on a POSIX $TZ ("UTC-14", "<+0545>-5:45"): "now"
    # was unreadable and "yesterday 5pm" lost its hour. The zone is clock.py's business.
    settings = {"RELATIVE_BASE": base, "PREFER_DATES_FROM": "past", "TIMEZONE": "UTC"}
    try:
        parsed = _dateparser().parse(text, languages=["en"], settings=settings)
        if parsed is not None and _NAMES_A_MONTH.search(text):
            # A month named without its day ("May 2026", "December") is its first day, as
            # "2026-05" is and as recall's window for it begins: dateparser put in today's day
            # of the month, so `forget --since "May 2026"` began on the 6th when said on a
            # 6th. Whether the day was filled in shows as a change when the fill is "first"
            # (a day named, "May 5", stays; "a year ago" names no month and keeps its day).
            first = _dateparser().parse(
                text, languages=["en"], settings={**settings, "PREFER_DAY_OF_MONTH": "first"}
            )
            if first is not None and first.day == 1:
                parsed = first
    except Exception:  # dateparser raises assorted errors on odd input
        parsed = None
    if parsed is not None:
        return local_to_utc(parsed)
    # Our vocabulary ("last spring"), when its phrase is the whole text: found inside more
    # words, it dropped them ("2024-06-01T12:00:00+05:00 garbage" was that day's midnight).
    found = _scan_phrase(text, base, query=False)
    if found is None and _CJK_LETTER.search(text):
        from memcli.timeparse.cjk import scan_cjk_phrase

        found = scan_cjk_phrase(text, base)
    if found is not None:
        span, (start, end) = found
        # Words before the phrase qualify it ("sometime in 2023", "roughly 3 weeks ago");
        # words after it are no part of it ("2024-06-01 garbage", "+05:00 garbage").
        if _NOT_WORDS.fullmatch(text[end:]):
            return local_to_utc(span.start)
    raise error
