"""Who said it, read from a transcript's lines: "Alice: I moved to Lisbon" is Alice's.

A chat log, a meeting transcript or an agent's history often comes as lines that open with the
speaker's name and a colon, with no separate speaker field. Retained as it is, such a line
has no context, so recall cannot tell who said what: the speaker boost never applies, a query
that names someone searches by a vector full of that name (scoring.without_names), and on
LoCoMo with the speakers only in the text, R@10 / MRR fell from 0.816 / 0.668 to 0.764 /
0.559 (bench/RESULTS.md). So retain takes the name as the item's context and keeps the rest as
its text, as if the caller had given the speaker.

A colon after a capitalised word is no proof of a speaker ("Note: ...", "Night: ..." in a
story, "Monday: dentist"), so a label is a speaker only where the input itself shows it:
- the call's items with no context are a transcript: at least half of them open with a name
  label (TRANSCRIPT_SHARE), and at least two names each open two items of different text (a
  dialogue, not one heading repeated); each such name (a talker) is then a speaker;
- a text that holds a whole transcript (a chat log pasted as one text) is split into its
  turns first, by the same rule over its lines (split_transcripts).
More than two names that always follow one another in the same order are the fields of
repeated records ("Title: ... Details: ... Title: ..."), not people talking.
Only the input decides, never what the bank holds: the same lines read the same way at every
retain, so retaining them again finds the duplicates. A name is one to three capitalised words
(not all capitals: "ERROR:", "TODO:", "Q:" are markers) or a run of CJK letters, and not a
time ("Monday:", "Yesterday:"). Items that are no conversation turns (a note's paragraphs, an
imported list: lead_in False), items kept verbatim and items with a context of their own are
left alone, as is an item whose later lines open with another name (two people's words).

Chat exports open each message with a time stamp: "[12/03/2023, 10:30:15] Alice: ..."
(WhatsApp on iOS), "12/03/2023, 10:30 - Alice: ..." (on Android), "[2024-03-02 10:30]" or
"[10:30]" (other logs). The speaker is read after the stamp;
the stamp is kept as written in the turn's metadata ("said_at"), and when it names a day
that can be told (an ISO date, or a day/month order that some stamp of the same input above
12 settles), the turn is said then, on the user's clock ($TZ), as the phone showed it, unless
the caller gave the item a time of its own.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

from memcli.clock import local_to_utc
from memcli.display import has_visible_text
from memcli.lang import CJK_SCRIPTS, script_of

# "Name: text" (or the full-width colon of CJK text), the label at most MAX_LABEL characters.
MAX_LABEL = 40
MAX_LABEL_WORDS = 3
# Chinese, Japanese and Korean names are 2-4 characters, a few up to 6; longer is a phrase.
MAX_CJK_NAME = 6
# iOS group chats write a sender who is no contact as "~ Alice" (a narrow no-break space).
_LABEL = re.compile(
    rf"[ \t]*(?:~[ \t\u202f]*)?([^\s:：~][^:：\n]{{0,{MAX_LABEL - 1}}}?)[ \t]*[:：][ \t]*(?=\S)"
)
# A chat export's time stamp at the start of a line, before the speaker: bracketed ("[12/03/
# 2023, 10:30:15]", "[2024-03-02 10:30]", "[10:30]") or WhatsApp on Android's "12/03/2023,
# 10:30 - ". A 12-hour clock may end in AM/PM (after a narrow no-break space, on iOS).
_DATE = r"\d{1,4}[./-]\d{1,2}[./-]\d{1,4}"
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp]\.?\s?[Mm]\.?)?"
# iOS opens a notice's or an attachment's line with a left-to-right mark (U+200E).
_STAMP = re.compile(
    rf"[ \t\u200e\u200f]*(?:\[((?:{_DATE}(?:,?\s+|T))?{_CLOCK})\]|({_DATE},?\s+{_CLOCK})\s+[-–]\s)"
    r"[ \t\u200e\u200f]*(?=\S)"
)
# Characters a name may hold besides letters: "O'Neil", "Jean-Luc", "Dr. Smith".
_NAME_MARKS = frozenset(".'’-")
# A transcript: this many names, each opening this many items (or lines) of different text,
# and at least this share of the items (lines) labelled.
DIALOGUE_SPEAKERS = 2
TURNS_PER_SPEAKER = 2
TRANSCRIPT_SHARE = 0.5
# ... and at least this share of the lines that open like a label ("Word: ...") open with a
# name: a document of fields ("Title:", "Details:", "Date:") has a name among its labels now
# and then.
NAME_SHARE = 0.75
# More speakers than two following one another in a fixed order this often are records.
CYCLE_SHARE = 0.9
# The metadata key of a turn's time stamp, as its line gave it.
SAID_AT = "said_at"
# Any fixed day: a label is a time if the time parser reads one in it at all.
_SOME_DAY = datetime(2000, 1, 1)


@lru_cache(maxsize=4096)
def is_name(label: str) -> bool:
    """One to three words of letters, each opening with a capital and not all capitals
    (Latin and other cased scripts), or a run of at most MAX_CJK_NAME CJK letters (no case,
    no spaces); not one ordinary word ("Date:", "Answer:", "Note:", "You:";
    entities.is_ordinary_word) and no time ("Monday", "Yesterday", "Dec 3")."""
    words = label.split()
    if not 1 <= len(words) <= MAX_LABEL_WORDS:
        return False
    cased = []
    for word in words:
        if not all(ch.isalpha() or ch in _NAME_MARKS for ch in word):
            return False
        if script_of(word[0]) in CJK_SCRIPTS:
            if len(words) > 1 or len(word) > MAX_CJK_NAME:
                return False
            continue
        if not word[0].isupper():
            return False
        cased.append(word)
    if cased and all(w.isupper() for w in cased):
        return False
    from memcli.entities import is_ordinary_word
    from memcli.timeparse import extract_fact_time

    if len(cased) == 1 and len(words) == 1 and is_ordinary_word(cased[0]):
        return False
    return extract_fact_time(label, _SOME_DAY) is None


def split_stamp(line: str) -> tuple[str | None, str]:
    """(the time stamp a chat export's line opens with, as written; the rest of the line),
    or (None, the line) when it opens with none."""
    match = _STAMP.match(line)
    if match is None:
        return None, line
    return (match.group(1) or match.group(2)).strip(), line[match.end() :]


def stamp_times(stamps: Sequence[str]) -> list[datetime | None]:
    """The instant (naive UTC) each stamp of one input names, read on the user's clock; None
    for a clock time alone, a day that does not exist, or a day/month order that no stamp of
    the input settles (none has a number above 12 in one of the two places)."""
    parts = [_stamp_parts(s) for s in stamps]
    # A stamp with both numbers above 12 names no day either way, and settles nothing.
    parts = [None if p and p[0] == "dmy?" and min(p[1], p[2]) > 12 else p for p in parts]
    slashed = [p for p in parts if p is not None and p[0] == "dmy?"]
    day_first = any(p[1] > 12 for p in slashed)
    month_first = any(p[2] > 12 for p in slashed)
    out: list[datetime | None] = []
    for p in parts:
        when = None
        if p is not None and p[0] != "clock":
            kind, a, b, year, hour, minute, second = p
            if kind == "ymd":
                month, day = a, b
            elif day_first != month_first:  # exactly one order is shown
                day, month = (a, b) if day_first else (b, a)
            else:
                day = month = 0
            try:
                when = local_to_utc(datetime(year, month, day, hour, minute, second))
            except (ValueError, OverflowError):
                when = None
        out.append(when)
    return out


_STAMP_PARTS = re.compile(
    r"(?:(\d{1,4})[./-](\d{1,2})[./-](\d{1,4})(?:,?\s+|T))?"
    r"(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s?([AaPp])\.?\s?[Mm]\.?)?"
)


def _stamp_parts(stamp: str) -> tuple | None:
    """(kind, first, second, year, hour, minute, second) of a stamp: kind "ymd" (an ISO-like
    year first), "dmy?" (day and month in an order still to settle) or "clock" (no date)."""
    match = _STAMP_PARTS.fullmatch(stamp)
    if match is None:
        return None
    first, middle, last, hour, minute, second, half = match.groups()
    hour_n, minute_n, second_n = int(hour), int(minute), int(second or 0)
    if half is not None:
        if not 1 <= hour_n <= 12:
            return None
        hour_n = hour_n % 12 + (12 if half in "Pp" else 0)
    if hour_n > 23 or minute_n > 59 or second_n > 59:
        return None
    if first is None:
        return ("clock", 0, 0, 0, hour_n, minute_n, second_n)
    if len(first) == 4:
        return ("ymd", int(middle), int(last), int(first), hour_n, minute_n, second_n)
    if len(last) not in (2, 4):
        return None
    year = int(last) + (2000 if len(last) == 2 else 0)
    return ("dmy?", int(first), int(middle), year, hour_n, minute_n, second_n)


def split_label(text: str) -> tuple[str, str] | None:
    """(name, the rest) of a text that opens with a speaker-like label, else None."""
    match = _LABEL.match(text)
    if match is None:
        return None
    label = match.group(1).strip()
    rest = text[match.end() :]
    if not label or not has_visible_text(rest) or not is_name(label):
        return None
    return label, rest


def _opens_like_a_label(text: str) -> bool:
    """Whether text opens as a label would, name or not: "Details: ...", "Date: ...",
    "ERROR: ..." as well as "Alice: ..." (one to three words, the first capitalised or CJK)."""
    match = _LABEL.match(text)
    if match is None:
        return False
    words = match.group(1).split()
    return 1 <= len(words) <= MAX_LABEL_WORDS and (
        words[0][0].isupper() or script_of(words[0][0]) in CJK_SCRIPTS
    )


def talkers(labelled: Sequence[tuple[str, str]], texts: Sequence[str]) -> set[str]:
    """The speakers of (name, text) labels found on these items or lines, when they make a
    transcript (the module's rule): every name, once DIALOGUE_SPEAKERS of them each open
    TURNS_PER_SPEAKER different texts. Empty when they make none."""
    said: dict[str, set[str]] = {}
    for name, rest in labelled:
        said.setdefault(name, set()).add(rest.strip())
    names = {name for name, texts in said.items() if len(texts) >= TURNS_PER_SPEAKER}
    total = sum(1 for text in texts if text.strip())
    if len(names) < DIALOGUE_SPEAKERS or len(labelled) < TRANSCRIPT_SHARE * total:
        return set()
    if len(labelled) < NAME_SHARE * sum(1 for text in texts if _opens_like_a_label(text)):
        return set()  # labels that are mostly no names: fields ("Title:", "Details:", "Date:")
    if len(names) > DIALOGUE_SPEAKERS and _fixed_cycle([name for name, _ in labelled]):
        return set()  # records ("Title: ... Details: ... Title: ..."), not people talking
    # Once it is a dialogue, one who says a single line is a speaker too.
    return set(said)


def _fixed_cycle(order: Sequence[str]) -> bool:
    """Whether each label is followed by the same next one (nearly) every time: the fields of
    repeated records. Three people talking seldom keep to one order (two always alternate,
    which is why only more than DIALOGUE_SPEAKERS are asked about)."""
    after: dict[str, Counter[str]] = {}
    for a, b in zip(order, order[1:]):
        after.setdefault(a, Counter())[b] += 1
    steps = sum(sum(c.values()) for c in after.values())
    usual = sum(c.most_common(1)[0][1] for c in after.values())
    return steps > 0 and usual >= CYCLE_SHARE * steps


def _candidate(item: Any) -> bool:
    """A conversation item (lead_in) with no speaker of its own, not kept verbatim."""
    return item.context is None and item.lead_in and not item.verbatim


class Turn(NamedTuple):
    """One turn of a transcript: its speaker (None: nobody's), its text, and the time stamp
    its line opened with, as written (None: none)."""

    speaker: str | None
    text: str
    stamp: str | None = None


def read_line(line: str) -> tuple[str | None, str, tuple[str, str] | None]:
    """(its time stamp, the line after it, (name, the rest) when that opens with a label)."""
    stamp, body = split_stamp(line)
    return stamp, body, split_label(body)


def transcript_turns(text: str) -> list[Turn] | None:
    """The turns of a text that is a transcript, each labelled line opening one (lines
    without a label continue the turn above, unless a time stamp opens them: a message of
    nobody's, such as a chat export's notice; lines before the first label are a turn of no
    speaker): a talker's turn without its label and stamp, or the line as written for a
    label that is no talker's. None when the text is no transcript."""
    lines = text.splitlines()
    read = [read_line(line) for line in lines]
    labelled = [label for _, _, label in read if label is not None]
    speakers = talkers(labelled, [body for _, body, _ in read])
    if not speakers:
        return None
    # A stamped chat (most talkers' lines carry a stamp): there a stamped line with no
    # talker is a message of its own (a notice); elsewhere it continues the turn above
    # ("[09:00] standup" in Alice's plan for the day).
    talking = [stamp for stamp, _, label in read if label is not None and label[0] in speakers]
    stamped_chat = sum(stamp is not None for stamp in talking) * 2 > len(talking)
    turns: list[Turn] = []
    name: str | None = None
    said: list[str] = []
    said_at: str | None = None

    def close() -> None:
        body = "\n".join(said).strip()
        if has_visible_text(body):
            turns.append(Turn(name, body, said_at))

    for line, (stamp, _, label) in zip(lines, read):
        if label is None and (stamp is None or not stamped_chat):
            said.append(line)
            continue
        close()
        if label is not None and label[0] in speakers:
            name, said, said_at = label[0], [label[1]], stamp
        else:
            name, said, said_at = None, [line], None
    close()
    return turns


def _one_speaker(text: str, name: str) -> bool:
    """No later line of text opens with another name: it is all one person's words."""
    for line in text.splitlines()[1:]:
        found = read_line(line)[2]
        if found is not None and found[0] != name:
            return False
    return True


def _said_by(item: Any, name: str | None, text: str, stamp: str | None = None) -> Any:
    """A copy of item with this speaker and text (its lists and dicts copied too), and the
    time stamp its line opened with in its metadata (said_at, unless the item has one)."""
    metadata = dict(item.metadata)
    if stamp is not None:
        metadata.setdefault(SAID_AT, stamp)
    return dataclasses.replace(
        item,
        text=text,
        context=name,
        tags=list(item.tags),
        metadata=metadata,
        mentions=dict(item.mentions),
    )


def _said_when(items: list[Any], stamped: Sequence[tuple[int, str]]) -> None:
    """Give each item at these positions the time its stamp names, where one can be told
    (stamp_times: the stamps of one input settle its day/month order together) and the
    caller gave none (`--at`, a JSONL "timestamp": what the caller says comes first)."""
    for (i, _), when in zip(stamped, stamp_times([stamp for _, stamp in stamped])):
        if when is not None and items[i].timestamp is None:
            items[i] = dataclasses.replace(items[i], timestamp=when)


def split_transcripts(items: Sequence[Any]) -> tuple[list[Any], int]:
    """The items with each one whose text is a whole transcript (a chat log pasted as one
    text) replaced by one item per turn, its speaker as its context; and how many turns got
    a speaker. The turns keep every other field of their item (its source, time, document,
    tags), in order, so each is the next one's lead-in."""
    out: list[Any] = []
    given = 0
    for item in items:
        turns = transcript_turns(item.text) if _candidate(item) and "\n" in item.text else None
        if turns is None:
            out.append(item)
            continue
        stamped = []
        for name, text, stamp in turns:
            if stamp is not None:
                stamped.append((len(out), stamp))
            out.append(_said_by(item, name, text, stamp))
            given += name is not None
        _said_when(out, stamped)
    return out, given


def read_speakers(items: Sequence[Any]) -> tuple[list[Any], int]:
    """The call's items with the speakers their text shows (the module's rule) as their
    context and the labels out of their text, as new items (the caller's are not changed);
    and how many items got a speaker."""
    out, given = split_transcripts(items)
    candidates = [i for i, item in enumerate(out) if _candidate(item)]
    read = {i: read_line(out[i].text) for i in candidates}
    labelled = [(i, stamp, *label) for i, (stamp, _, label) in read.items() if label]
    speakers = talkers(
        [(name, rest) for _, _, name, rest in labelled], [read[i][1] for i in candidates]
    )
    stamped = []
    for i, stamp, name, rest in labelled:
        if name in speakers and _one_speaker(rest, name):
            out[i] = _said_by(out[i], name, rest, stamp)
            given += 1
            if stamp is not None:
                stamped.append((i, stamp))
    _said_when(out, stamped)
    return out, given
