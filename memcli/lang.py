"""Which writing systems a text uses, from Unicode script ranges (no word lists, no model).

Used to pick an embedder for a new bank (mostly Chinese, Japanese or Korean text needs a
multilingual model), to warn when a bank's text no longer suits its embedder, and by recall to
weigh an English-only embedder down for a CJK query. Only letters count: digits, punctuation,
spaces and emoji say nothing about the language.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# (first, last, script) code point ranges. Han includes the extension blocks and
# compatibility ideographs; kana includes the phonetic extensions and half-width katakana;
# Hangul includes the jamo blocks and compatibility jamo.
_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x1100, 0x11FF, "hangul"),
    (0x2E80, 0x2FDF, "han"),  # radicals
    (0x3005, 0x3007, "han"),  # 々 〆 〇
    (0x3021, 0x3029, "han"),
    (0x3040, 0x309F, "kana"),
    (0x30A0, 0x30FF, "kana"),
    (0x3130, 0x318F, "hangul"),
    (0x31F0, 0x31FF, "kana"),
    (0x3400, 0x4DBF, "han"),
    (0x4E00, 0x9FFF, "han"),
    (0xA960, 0xA97F, "hangul"),
    (0xAC00, 0xD7AF, "hangul"),
    (0xD7B0, 0xD7FF, "hangul"),
    (0xF900, 0xFAFF, "han"),
    (0xFF66, 0xFF9F, "kana"),
    (0xFFA0, 0xFFDC, "hangul"),
    (0x1B000, 0x1B16F, "kana"),
    (0x20000, 0x3FFFF, "han"),
)
CJK_SCRIPTS = frozenset({"han", "kana", "hangul"})
_ANY_CJK = re.compile(
    "[" + "".join(f"{chr(a)}-{chr(b)}" for a, b, s in _RANGES if s in CJK_SCRIPTS) + "]"
)

# A bank whose text is at least this share CJK letters gets (or should have) a multilingual
# embedder. A half: mixed notes ("meeting with 王伟 about the Q3 budget") stay with the
# English default unless CJK dominates.
MOSTLY_CJK = 0.5


def script_of(ch: str) -> str | None:
    """The script of a letter: han, kana, hangul, latin or other; None for a non-letter."""
    cp = ord(ch)
    if cp < 0x80:
        return "latin" if ch.isalpha() else None
    for first, last, script in _RANGES:
        if first <= cp <= last:
            return script
        if cp < first:
            break
    if not ch.isalpha():
        return None
    return "latin" if cp < 0x250 or 0x1E00 <= cp <= 0x1EFF else "other"


def script_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ch in text:
        script = script_of(ch)
        if script is not None:
            counts[script] = counts.get(script, 0) + 1
    return counts


def cjk_share(texts: str | Iterable[str]) -> float:
    """Share of the letters of texts that are Han, kana or Hangul (0.0 with no letters)."""
    if isinstance(texts, str):
        if not _ANY_CJK.search(texts):
            return 0.0  # the common case, at C speed (recall's floor asks of 200 candidates)
        texts = [texts]
    cjk = total = 0
    for text in texts:
        for script, n in script_counts(text).items():
            total += n
            if script in CJK_SCRIPTS:
                cjk += n
    return cjk / total if total else 0.0


def is_mostly_cjk(texts: str | Iterable[str], threshold: float = MOSTLY_CJK) -> bool:
    return cjk_share(texts) >= threshold


def has_cjk(text: str) -> bool:
    """Whether text holds a Han, kana or Hangul letter."""
    return _ANY_CJK.search(text) is not None


def in_other_script(query_writing: str | None, text: str) -> bool:
    """Whether text is written in another script than a query written so (writing): one
    of them mostly CJK, the other not; a text or query with no letters is in none."""
    if query_writing is None:
        return False
    written = writing(text)
    return written is not None and written != query_writing


def writing(text: str) -> str | None:
    """ "cjk" when at least half of a text's letters are Han, kana or Hangul, "other" when
    fewer are, None when it has no letters (a time, a number, emoji): what recall's floor
    asks of each of 200 candidates, so the common cases are decided at C speed."""
    cjk = len(text) - len(_ANY_CJK.sub("", text))
    if cjk == 0:
        return "other" if any(ch.isalpha() for ch in text) else None
    if 2 * cjk >= len(text):  # half of all its characters: of its letters too
        return "cjk"
    return "cjk" if cjk_share(text) >= MOSTLY_CJK else "other"


def cjk_language(text: str) -> str | None:
    """The CJK language of text: ja with kana, ko with Hangul, zh for Han alone, else None.

    Kana wins over Han because Japanese writes with both; Hangul over Han likewise."""
    counts = script_counts(text)
    if counts.get("kana"):
        return "ja"
    if counts.get("hangul"):
        return "ko"
    if counts.get("han"):
        return "zh"
    return None
