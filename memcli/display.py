"""Stored text as shown in the text formats: one light module (no numpy), for every command."""

from __future__ import annotations

import re
import unicodedata

# C0 and C1 controls but newline and tab, and the bidirectional overrides: stored text is
# anyone's, and a terminal obeys ESC ] (retitle, hyperlinks), ESC [ (cursor, colours) and the
# rest; an override reorders what is read.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """Text output with every control character shown as an escape (ESC as \\x1b): JSON
    output keeps the stored text exact, the text formats must not drive a terminal."""
    return _UNSAFE.sub(
        lambda m: f"\\x{ord(m[0]):02x}" if m[0] < "\u0100" else f"\\u{ord(m[0]):04x}", text
    )


def prints_as_is(text: str) -> bool:
    """Whether terminal_safe leaves text as it is (no control character to escape)."""
    return _UNSAFE.search(text) is None


def one_line(text: str) -> str:
    """Text shown inside one line (a query echoed in a header): its whitespace runs, line
    breaks included, as one space."""
    return " ".join(text.split())


NO_WORDS = "the query has no letters, digits or symbols to search for (only punctuation)"


def has_searchable_text(text: str) -> bool:
    """True when the text has a letter, a digit or a symbol (an emoji): a query of only
    punctuation ('"', "?!") has nothing to search for, and its embedding ranks noise."""
    return any(unicodedata.category(ch)[0] in "LNS" for ch in text)


def has_visible_text(text: str) -> bool:
    """True when the text has at least one character that is neither space nor control."""
    return any(not ch.isspace() and unicodedata.category(ch)[0] != "C" for ch in text)


def memory_days(row: dict) -> str:
    """A bank row's (store.banks.bank_stats) first and last memory as days for text output,
    "2026-02-28 .. 2026-04-04": a stated period's start as the calendar day it names, the
    instant a fact was said as the user's local day. Pops the row's two period flags, which
    machine output does not carry."""
    from memcli.clock import local_day

    days = []
    for end in ("first", "last"):
        value, is_period = row[end], row.pop(f"{end}_is_period", False)
        days.append((value or "")[:10] if is_period else local_day(value))
    if not any(days):  # an empty bank: it printed " .. "
        return "no memories yet"
    return " .. ".join(days)
