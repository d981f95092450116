"""Who said it, read from a transcript's lines: "Alice: I moved to Lisbon" is Alice's.

A chat log, a meeting transcript or an agent's history often comes as lines that open with the
speaker's name and a colon, with no separate speaker field. Retained as it is, such a line
has no context, so recall cannot tell who said what: the speaker boost never applies, a query
that names someone searches by a vector full of that name (scoring.without_names), and on
LoCoMo with the speakers only in the text, R@10 / MRR fell from 0.816 / 0.668 to 0.764 /
0.559 (bench/RESULTS.md). So retain takes the name as the item's context and keeps the rest as
its text, as if the caller had given the speaker.

A colon after a capitalised word is no proof of a speaker ("Note: ...", "Night: ..." in a
story), so a label counts only where the input shows it is one:
- a transcript: at least half the call's items with no context open with a label
  (TRANSCRIPT_SHARE), and at least two labels each open two items of different text (a
  dialogue, not one heading repeated); then each of its labels is a speaker; or
- a name the bank already knows as a context (the next lines of a conversation retained
  earlier, one at a time, as an agent retains them).
Items that are no conversation turns (a note's paragraphs, an imported list: lead_in False)
and items with a context of their own are left alone. A transcript pasted as one text (its
lines by the same rule) is first split into its turns, one item each (split_transcripts).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memcli.lang import script_of

# "Name: text" (or the full-width colon of CJK text), the label at most MAX_LABEL characters.
MAX_LABEL = 40
MAX_LABEL_WORDS = 3
_LABEL = re.compile(rf"[ \t]*([^\s:：][^:：\n]{{0,{MAX_LABEL - 1}}}?)[ \t]*[:：][ \t]*(?=\S)")
# Characters a name may hold besides letters: "O'Neil", "Jean-Luc", "Dr. Smith".
_NAME_MARKS = frozenset(".'’-")
# A transcript: this many distinct labels, each opening this many items of different text,
# and at least this share of the call's candidate items labelled.
DIALOGUE_SPEAKERS = 2
TURNS_PER_SPEAKER = 2
TRANSCRIPT_SHARE = 0.5


def _is_name(label: str) -> bool:
    """One to three words of letters, each opening with a capital (Latin and other cased
    scripts), or a run of CJK letters (no case, no spaces)."""
    words = label.split()
    if not 1 <= len(words) <= MAX_LABEL_WORDS:
        return False
    for word in words:
        if not all(ch.isalpha() or ch in _NAME_MARKS for ch in word):
            return False
        first = word[0]
        script = script_of(first)
        if script in ("han", "kana", "hangul"):
            if len(words) > 1:
                return False
            continue
        if not first.isupper():
            return False
    return True


def split_label(text: str) -> tuple[str, str] | None:
    """(name, the rest) of a text that opens with a speaker-like label, else None."""
    match = _LABEL.match(text)
    if match is None:
        return None
    label = match.group(1).strip()
    rest = text[match.end() :]
    if not label or not _is_name(label) or not rest.strip():
        return None
    return label, rest


def is_transcript(labelled: Sequence[tuple[str, str]], total: int) -> bool:
    """Whether (name, text) labels found on `total` lines or items make a transcript: at
    least TRANSCRIPT_SHARE of them labelled, and DIALOGUE_SPEAKERS names that each open
    TURNS_PER_SPEAKER different texts (a dialogue, not one heading repeated)."""
    said: dict[str, set[str]] = {}
    for name, rest in labelled:
        said.setdefault(name, set()).add(rest.strip())
    talkers = sum(1 for texts in said.values() if len(texts) >= TURNS_PER_SPEAKER)
    return talkers >= DIALOGUE_SPEAKERS and len(labelled) >= TRANSCRIPT_SHARE * total


def _candidate(item: Any) -> bool:
    """A conversation item (lead_in) with no speaker of its own, not kept verbatim."""
    return item.context is None and item.lead_in and not item.verbatim


def transcript_turns(text: str) -> list[tuple[str | None, str]] | None:
    """The turns of a text that is a transcript, one "Name: ..." line opening each (lines
    without a label continue the turn above; lines before the first label are a turn of no
    speaker), or None when its lines are no transcript."""
    lines = text.splitlines()
    found = [split_label(line) for line in lines]
    labelled = [f for f in found if f is not None]
    if len(labelled) < 2 or not is_transcript(labelled, sum(1 for ln in lines if ln.strip())):
        return None
    turns: list[tuple[str | None, str]] = []
    name: str | None = None
    said: list[str] = []

    def close() -> None:
        body = "\n".join(said).strip()
        if body:
            turns.append((name, body))

    for line, label in zip(lines, found):
        if label is None:
            said.append(line)
            continue
        close()
        name, said = label[0], [label[1]]
    close()
    return turns


def split_transcripts(items: Sequence[Any]) -> tuple[list[Any], int]:
    """The items with each one whose text is a whole transcript (a chat log pasted or read
    from a file) replaced by one item per turn, its speaker as its context; and how many
    turns got a speaker. The turns keep every other field of their item (its source, time,
    document, tags), in order, so each is the next one's lead-in."""
    out: list[Any] = []
    given = 0
    for item in items:
        turns = transcript_turns(item.text) if _candidate(item) and "\n" in item.text else None
        if turns is None:
            out.append(item)
            continue
        for name, text in turns:
            out.append(
                dataclasses.replace(
                    item,
                    text=text,
                    context=name,
                    tags=list(item.tags),
                    metadata=dict(item.metadata),
                    mentions=dict(item.mentions),
                )
            )
            given += name is not None
    return out, given


def assign_speakers(
    items: Sequence[Any],
    known_contexts: Callable[[list[str]], Iterable[str]],
) -> int:
    """Give each conversation item (lead_in True) with no context the speaker its text opens
    with, where the call's items are a transcript or the bank knows that speaker; the item's
    text loses the label. `known_contexts(names)`: those of the names that are contexts in
    the bank (any case). Returns how many items got a speaker."""
    candidates = [item for item in items if _candidate(item)]
    labelled = [(item, *found) for item in candidates if (found := split_label(item.text))]
    if not labelled:
        return 0
    names = {name for _, name, _ in labelled}
    # In a transcript every label is a speaker (one who said a single line too).
    if is_transcript([(name, rest) for _, name, rest in labelled], len(candidates)):
        speakers = names
    else:
        known = {k.lower() for k in known_contexts(sorted(names))}
        speakers = {name for name in names if name.lower() in known}
    given = 0
    for item, name, rest in labelled:
        if name in speakers:
            item.context, item.text = name, rest
            given += 1
    return given
