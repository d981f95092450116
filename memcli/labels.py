"""What a name or label may be: one line of visible text. Light (no store, no numpy): the
CLI checks --bank before anything is opened, --help included."""

from __future__ import annotations

import unicodedata

from memcli.display import has_visible_text


def has_control(value: str) -> bool:
    """Whether value holds a control character (Cc: C0 and C1 controls and DEL; U+009B
    starts a terminal's control sequence)."""
    return any(unicodedata.category(ch) == "Cc" for ch in value)


def label_problem(value: str) -> str | None:
    """What is wrong with a label (a tag, a source or document id), or None. A label is one
    line of visible text: a line break in one printed as a forged memory line in `list`."""
    if not has_visible_text(value):
        return "is empty or only spaces"
    if has_control(value):
        return "holds a line break or another control character"
    return None


def bank_name_problem(name: str) -> str | None:
    """What is wrong with a bank name, or None."""
    if not name or not name.strip():
        return "a bank name cannot be empty"
    if name.startswith("\x00") or has_control(name):
        return f"bad bank name {name!r}: control characters are not allowed"
    if name != name.strip():
        # "work " beside "work": a stray space in MEM_BANK split a user's memories in two.
        return f"bad bank name {name!r}: it starts or ends with a space"
    return None
