"""Dates in Chinese, Japanese and Korean text: what the English scanner (parse.py) cannot read.

Called by timeparse when its own scan finds nothing and the text has CJK letters. The same
conventions: half-open spans, weeks start on Monday, our own calendar arithmetic (dateparser
reads "2024年4月1日" but not "上周三", "先週の土曜日" or "지난 수요일", and returns instants where
a week or a month is meant). Only calendar words are read: numbers need 年/月/日 (년/월/일) or
a time unit beside them, so "3个人" or "5층" are never dates.

- absolute: 2024年4月1日, 2024年4月, 2024年 (also 2024년 4월 1일, 4月1日 / 4월 1일 without a
  year: the year that puts it nearest to the anchor);
- relative days: 今天/今日/오늘, 昨天/昨日/어제, 前天/一昨日/그제, 明天/明日/내일, 后天/明後日/모레;
- weeks, with or without a weekday: 上周(三), 这周, 下周, 上星期三, 先週(の土曜日), 今週, 来週,
  지난주 (수요일), 이번 주, 다음 주; "지난 수요일" alone is the latest Wednesday before the anchor;
- months and years: 上个月/先月/지난달, 这个月/今月/이번 달, 下个月/来月/다음 달, 去年/昨年/작년,
  今年/올해, 明年/来年/내년;
- N units ago: 3天前, 三个月前, 2週間前, 3일 전, 2주 전, 5년 전.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from memcli.timeparse.spans import (
    TimeSpan,
    day_span,
    days_span,
    month_span,
    shift_months,
    week_start,
    year_span,
)

_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7}
_ZH_DIGITS.update({"八": 8, "九": 9})
_NUM = r"(\d{1,3}|[一二两三四五六七八九十]{1,3})"

# Weekday names -> Monday = 0.
_WEEKDAY_ZH = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_WEEKDAY_JA = {"月": 0, "火": 1, "水": 2, "木": 3, "金": 4, "土": 5, "日": 6}
_WEEKDAY_KO = {"월": 0, "화": 1, "수": 2, "목": 3, "금": 4, "토": 5, "일": 6}
# 上周三 / 上周的周三 / 上个星期五: the weekday digit may follow the week word directly; 一 not
# when it starts a word (上周一起 "together last week").
_WD_ZH = r"(?:的?(?:周|週|星期|礼拜|禮拜))?([一二三四五六日天])(?![起样樣直些点點共定般切])"
_WD_JA = r"(?:の)?([月火水木金土日])曜(?:日)?"
_WD_KO = r"\s*([월화수목금토일])요일"

_DAY_WORDS = {
    -2: ("前天", "一昨日", "그저께", "그제"),
    -1: ("昨天", "昨日", "어제"),
    0: ("今天", "今日", "오늘"),
    1: ("明天", "明日", "내일"),
    2: ("后天", "後天", "明後日", "모레"),
}
_WEEK_WORDS = {
    -1: ("上周", "上週", "上星期", "上个星期", "上個星期", "上礼拜", "先週", "지난주", "지난 주"),
    0: (
        "这周",
        "這週",
        "本周",
        "本週",
        "这星期",
        "這星期",
        "这个星期",
        "今週",
        "이번 주",
        "이번주",
    ),
    1: ("下周", "下週", "下星期", "下个星期", "下個星期", "下礼拜", "来週", "다음 주", "다음주"),
}
_WEEK_WORDS[0] += ("이번주",)
_MONTH_WORDS = {
    -1: ("上个月", "上個月", "上月", "先月", "지난달", "지난 달"),
    0: ("这个月", "這個月", "本月", "今月", "이번 달", "이번달"),
    1: ("下个月", "下個月", "下月", "来月", "다음 달", "다음달"),
}
_YEAR_WORDS = {
    -1: ("去年", "昨年", "작년", "지난해"),
    0: ("今年", "올해", "금년"),
    1: ("明年", "来年", "내년"),
}


def _alternatives(words: dict[int, tuple[str, ...]]) -> str:
    flat = sorted((w for ws in words.values() for w in ws), key=len, reverse=True)
    return "|".join(re.escape(w) for w in flat)


def _offset(words: dict[int, tuple[str, ...]], found: str) -> int:
    return next(k for k, ws in words.items() if found in ws)


_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "ymd",
        re.compile(r"(\d{4})\s*[年년]\s*(\d{1,2})\s*[月월]\s*(\d{1,2})\s*(?:[日号號일])"),
    ),
    ("ym", re.compile(r"(\d{4})\s*[年년]\s*(\d{1,2})\s*[月월]")),
    ("md", re.compile(r"(?<!\d)(\d{1,2})\s*[月월]\s*(\d{1,2})\s*(?:[日号號일])")),
    ("y", re.compile(r"(?<!\d)((?:19|20)\d\d|2100)\s*[年년](?!\s*\d{1,2}\s*[月월])")),
    (
        "week_day",
        re.compile(
            rf"({_alternatives(_WEEK_WORDS)})\s*(?:{_WD_ZH}|{_WD_JA}|{_WD_KO}|"
            r"([月火水木金土日])曜)"
        ),
    ),
    ("last_weekday", re.compile(rf"지난{_WD_KO}")),
    ("week", re.compile(_alternatives(_WEEK_WORDS))),
    ("day", re.compile(_alternatives(_DAY_WORDS))),
    ("month", re.compile(_alternatives(_MONTH_WORDS))),
    ("year", re.compile(_alternatives(_YEAR_WORDS))),
    (
        "ago",
        re.compile(
            # (?<!\d): "99999年前" is no "999年前" (years ago past the calendar: no date)
            rf"(?<!\d){_NUM}\s*(天|日|个?星期|個?星期|周|週間?|个月|個月|ヶ月|か月|カ月|年)\s*前"
            r"|(?<!\d)(\d{1,3})\s*(일|주|개월|달|년)\s*전"
        ),
    ),
]


def _number(token: str) -> int:
    if token.isdigit():
        return int(token)
    if token == "十":
        return 10
    if "十" in token:  # 十二, 二十, 二十三
        tens, _, ones = token.partition("十")
        return (_ZH_DIGITS.get(tens, 1) if tens else 1) * 10 + (_ZH_DIGITS.get(ones, 0))
    return _ZH_DIGITS.get(token, 0)


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _weekday_index(groups: tuple[str | None, ...]) -> int | None:
    zh, ja, ko, ja_short = groups
    if zh:
        return _WEEKDAY_ZH[zh]
    if ja or ja_short:
        return _WEEKDAY_JA[ja or ja_short]  # type: ignore[index]
    if ko:
        return _WEEKDAY_KO[ko]
    return None


def _span(kind: str, m: re.Match[str], anchor: datetime) -> TimeSpan | None:
    today = anchor.date()
    if kind == "ymd":
        d = _safe_date(int(m[1]), int(m[2]), int(m[3]))
        return day_span(d) if d else None
    if kind == "ym":
        month = int(m[2])
        return month_span(int(m[1]), month) if 1 <= month <= 12 else None
    if kind == "y":
        return year_span(int(m[1]))
    if kind == "md":
        month, day = int(m[1]), int(m[2])
        options = [
            d
            for y in (today.year - 1, today.year, today.year + 1)
            if (d := _safe_date(y, month, day)) is not None
        ]
        if not options:
            return None
        return day_span(min(options, key=lambda d: abs((d - today).days)))
    if kind in ("week", "week_day"):
        offset = _offset(_WEEK_WORDS, m[1] if kind == "week_day" else m[0])
        monday = week_start(today) + timedelta(weeks=offset)
        if kind == "week":
            return days_span(monday, monday + timedelta(days=7))
        index = _weekday_index((m[2], m[3], m[4], m[5]))
        return None if index is None else day_span(monday + timedelta(days=index))
    if kind == "last_weekday":
        index = _WEEKDAY_KO[m[1]]
        back = (today.weekday() - index) % 7 or 7
        return day_span(today - timedelta(days=back))
    if kind == "day":
        return day_span(today + timedelta(days=_offset(_DAY_WORDS, m[0])))
    if kind == "month":
        first = shift_months(today.replace(day=1), _offset(_MONTH_WORDS, m[0]))
        return month_span(first.year, first.month)
    if kind == "year":
        return year_span(today.year + _offset(_YEAR_WORDS, m[0]))
    if kind == "ago":
        count = _number(m[1] or m[3])
        unit = m[2] or m[4]
        if count <= 0:
            return None
        if unit in ("天", "日", "일"):
            return day_span(today - timedelta(days=count))
        if unit in ("年", "년"):
            return year_span(today.year - count)
        if "月" in unit or unit in ("개월", "달"):
            first = shift_months(today.replace(day=1), -count)
            return month_span(first.year, first.month)
        monday = week_start(today) - timedelta(weeks=count)  # weeks
        return days_span(monday, monday + timedelta(days=7))
    return None


_ANY_CJK = re.compile("[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u9fff\uac00-\ud7af]")


def scan_cjk(text: str, anchor: datetime) -> TimeSpan | None:
    """The first (leftmost) CJK date expression of text resolved against anchor, or None."""
    found = scan_cjk_phrase(text, anchor)
    return found[0] if found else None


def scan_cjk_phrase(text: str, anchor: datetime) -> tuple[TimeSpan, tuple[int, int]] | None:
    """scan_cjk's period and where in text its words are (start, end), or None."""
    if not _ANY_CJK.search(text):  # the common English case: one regex search
        return None
    found: list[tuple[int, int, TimeSpan, int]] = []
    for priority, (kind, rx) in enumerate(_PATTERNS):
        for m in rx.finditer(text):
            try:
                span = _span(kind, m, anchor)
            except (ValueError, OverflowError):  # year 0 or 10000, a day past 9999-12-31
                span = None  # off the calendar: no date, as in the English parser
            if span is not None:
                found.append((m.start(), priority, span, m.end()))
                break
    if not found:
        return None
    start, _, span, end = min(found, key=lambda f: (f[0], f[1]))
    return span, (start, end)
