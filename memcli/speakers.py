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
and items with a context of their own are left alone.
"""

from __future__ import annotations

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


def assign_speakers(
    items: Sequence[Any],
    known_contexts: Callable[[list[str]], Iterable[str]],
) -> int:
    """Give each conversation item (lead_in True) with no context the speaker its text opens
    with, where the call's items are a transcript or the bank knows that speaker; the item's
    text loses the label. `known_contexts(names)`: those of the names that are contexts in
    the bank (any case). Returns how many items got a speaker."""
    labelled: list[tuple[Any, str, str]] = []
    candidates = 0
    for item in items:
        if item.context is not None or not item.lead_in or item.verbatim:
            continue
        candidates += 1
        found = split_label(item.text)
        if found is not None:
            labelled.append((item, *found))
    if not labelled:
        return 0
    texts: dict[str, set[str]] = {}
    for _, name, rest in labelled:
        texts.setdefault(name, set()).add(rest)
    talkers = {name for name, said in texts.items() if len(said) >= TURNS_PER_SPEAKER}
    transcript = (
        len(talkers) >= DIALOGUE_SPEAKERS and len(labelled) >= TRANSCRIPT_SHARE * candidates
    )
    # In a transcript every label is a speaker (one who said a single line too).
    speakers = set(texts) if transcript else set()
    others = sorted(set(texts) - speakers)
    if others:
        known = {k.lower() for k in known_contexts(others)}
        speakers |= {name for name in others if name.lower() in known}
    given = 0
    for item, name, rest in labelled:
        if name in speakers:
            item.context, item.text = name, rest
            given += 1
    return given
