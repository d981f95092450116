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
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from memcli.display import has_visible_text
from memcli.lang import CJK_SCRIPTS, script_of

# "Name: text" (or the full-width colon of CJK text), the label at most MAX_LABEL characters.
MAX_LABEL = 40
MAX_LABEL_WORDS = 3
# Chinese, Japanese and Korean names are 2-4 characters, a few up to 6; longer is a phrase.
MAX_CJK_NAME = 6
_LABEL = re.compile(rf"[ \t]*([^\s:：][^:：\n]{{0,{MAX_LABEL - 1}}}?)[ \t]*[:：][ \t]*(?=\S)")
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


def transcript_turns(text: str) -> list[tuple[str | None, str]] | None:
    """The turns of a text that is a transcript, each labelled line opening one (lines
    without a label continue the turn above; lines before the first label are a turn of no
    speaker): (its speaker, its text), or (None, the line as written) for a label that is no
    talker's. None when the text is no transcript."""
    lines = text.splitlines()
    found = [split_label(line) for line in lines]
    labelled = [f for f in found if f is not None]
    speakers = talkers(labelled, lines)
    if not speakers:
        return None
    turns: list[tuple[str | None, str]] = []
    name: str | None = None
    said: list[str] = []

    def close() -> None:
        body = "\n".join(said).strip()
        if has_visible_text(body):
            turns.append((name, body))

    for line, label in zip(lines, found):
        if label is None:
            said.append(line)
            continue
        close()
        if label[0] in speakers:
            name, said = label[0], [label[1]]
        else:
            name, said = None, [line]
    close()
    return turns


def _one_speaker(text: str, name: str) -> bool:
    """No later line of text opens with another name: it is all one person's words."""
    for line in text.splitlines()[1:]:
        found = split_label(line)
        if found is not None and found[0] != name:
            return False
    return True


def _said_by(item: Any, name: str | None, text: str) -> Any:
    """A copy of item with this speaker and text (its lists and dicts copied too)."""
    return dataclasses.replace(
        item,
        text=text,
        context=name,
        tags=list(item.tags),
        metadata=dict(item.metadata),
        mentions=dict(item.mentions),
    )


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
        for name, text in turns:
            out.append(_said_by(item, name, text))
            given += name is not None
    return out, given


def read_speakers(items: Sequence[Any]) -> tuple[list[Any], int]:
    """The call's items with the speakers their text shows (the module's rule) as their
    context and the labels out of their text, as new items (the caller's are not changed);
    and how many items got a speaker."""
    out, given = split_transcripts(items)
    candidates = [i for i, item in enumerate(out) if _candidate(item)]
    labelled = [(i, *found) for i in candidates if (found := split_label(out[i].text))]
    speakers = talkers(
        [(name, rest) for _, name, rest in labelled], [out[i].text for i in candidates]
    )
    for i, name, rest in labelled:
        if name in speakers and _one_speaker(rest, name):
            out[i] = _said_by(out[i], name, rest)
            given += 1
    return out, given
