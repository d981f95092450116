"""Splitting input text into chunks (kept raw for --include-chunks) and facts (what is recalled).

No LLM: a short text (a dialog turn, a note) is one fact; a longer one is cut at sentence
boundaries into facts of a few sentences, so each fact still reads on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PARAGRAPH = re.compile(r"\n\s*\n")
# Han and kana are written without spaces between words: two of them count as one word.
# Hangul is written with spaces and is counted by them, as Latin is.
_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
_CJK_LETTERS = _UNSPACED + "\uac00-\ud7af"
# CJK and full-width punctuation (。、「」，！？): no word of its own.
_CJK_PUNCTUATION = "\u3000-\u303f\uff00-\uffef"
# What word counts are made of: one unspaced letter, or a run of anything else that is neither
# space nor CJK punctuation (a Latin or Hangul word, a number, a dash).
_RUN = re.compile(rf"[{_UNSPACED}]|[^\s{_UNSPACED}{_CJK_PUNCTUATION}]+")
_IS_UNSPACED = re.compile(rf"[{_UNSPACED}]")
# Where a sentence ends (its closing quotes stay with it):
# - . ! ? then a space and a plausible Latin sentence start (a capital: "e.g. this" goes on);
# - a CJK full stop;
# - a half-width . ! ? right before a CJK or Hangul letter, with or without a space, as chat
#   and Korean write it ("疲れた!明日は", "바빴어요. 점심도").
_SENTENCE_END = re.compile(
    r"[.!?][\"')\]]*(?=\s+[\"'(\[]?[A-Z0-9\u00c0-\u024f])"
    r"|[。！？][\"')\]」』）]*"
    rf"|[.!?][\"')\]」』）]*(?=\s*[{_CJK_LETTERS}])"
)
# Where a run-on CJK sentence may be cut when no sentence end comes in time: after a clause.
_CLAUSE_MARKS = frozenset("，、；：,;:")
_CAUSAL_START = re.compile(
    r"^(because|so|therefore|thus|hence|as a result|consequently|that's why|that is why|"
    r"this led to|which led to|this caused|which caused)\b",
    re.IGNORECASE,
)
_CAUSAL_INSIDE = re.compile(r"\b(because of this|led to|caused|due to this|as a result)\b", re.I)


def starts_with_cause(text: str) -> bool:
    """True when a text opens as the consequence or explanation of what came before it."""
    return _CAUSAL_START.match(text) is not None


@dataclass(frozen=True)
class SplitFact:
    text: str
    chunk_index: int
    # Index of an earlier fact of the same input this one is the consequence of, if any.
    caused_by: int | None = None


def _measure(text: str) -> float:
    """Words as a real number: a run of Latin, Hangul or digits is one, an unspaced letter a
    half."""
    runs = _RUN.findall(text)
    unspaced = sum(1 for run in runs if _IS_UNSPACED.match(run))
    return len(runs) - unspaced + unspaced / 2


def word_count(text: str) -> int:
    """Words, counting two Han or kana letters as one word (they have no spaces)."""
    return int(_measure(text))


def _join(pieces: list[str]) -> str:
    """Pieces of one text joined with a space, but none before a Han, kana or CJK punctuation
    piece that follows one of those or a sentence's end (the text had none there)."""
    out = ""
    for piece in pieces:
        if out and not (_NO_SPACE_BEFORE.match(piece[0]) and _NO_SPACE_AFTER.match(out[-1])):
            out += " "
        out += piece
    return out


_NO_SPACE_BEFORE = re.compile(rf"[{_UNSPACED}{_CJK_PUNCTUATION}]")
_NO_SPACE_AFTER = re.compile(rf"[{_UNSPACED}{_CJK_PUNCTUATION}.!?\"')\]]")


def sentences(text: str) -> list[str]:
    out: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        paragraph = " ".join(paragraph.split())
        start = 0
        for end in _SENTENCE_END.finditer(paragraph):
            piece = paragraph[start : end.end()].strip()
            if piece:
                out.append(piece)
            start = end.end()
        rest = paragraph[start:].strip()
        if rest:
            out.append(rest)
    return out


def _runs(text: str) -> tuple[list[re.Match[str]], list[float]]:
    """The word runs of a text and the words before each run (one entry more: the total)."""
    runs = list(_RUN.finditer(text))
    before = [0.0]
    for run in runs:
        before.append(before[-1] + (0.5 if _IS_UNSPACED.match(run.group()) else 1.0))
    return runs, before


def _cut_long(sentence: str, max_words: int) -> list[str]:
    if not _IS_UNSPACED.search(sentence):
        words = sentence.split()
        if len(words) <= max_words:
            return [sentence]
        return [" ".join(words[i : i + max_words]) for i in range(0, len(words), max_words)]
    # Han or kana with no sentence end in time: cut after the last clause mark (，、；) in the
    # second half of a piece, else after its last space, else where the limit falls.
    runs, before = _runs(sentence)
    pieces: list[str] = []
    first, start = 0, 0
    while before[-1] - before[first] > max_words:
        last = first + 1  # runs[first:last] fit (a run is at most one word)
        while before[last + 1] - before[first] <= max_words:
            last += 1
        cut = last
        for mark_set in (_CLAUSE_MARKS, frozenset(" ")):
            found = next(
                (
                    k
                    for k in range(last, first + (last - first) // 2, -1)
                    if mark_set & set(sentence[runs[k - 1].end() : runs[k].start()])
                ),
                None,
            )
            if found is not None:
                cut = found
                break
        end = runs[cut].start()
        pieces.append(sentence[start:end].strip())
        first, start = cut, end
    pieces.append(sentence[start:].strip())
    return [p for p in pieces if p]


def first_words(text: str, n: int) -> str:
    """The beginning of a text, at most n words of it (two Han or kana letters a word)."""
    if not _IS_UNSPACED.search(text):
        return " ".join(text.split()[:n])
    runs, before = _runs(text)
    if before[-1] <= n:
        return " ".join(text.split())
    last = 0
    while last < len(runs) and before[last + 1] <= n:
        last += 1
    return " ".join(text[: runs[last - 1].end()].split()) if last else ""


def split_text(
    text: str, max_words: int = 60, chunk_max_words: int = 350
) -> tuple[list[str], list[SplitFact]]:
    """(chunks, facts) of one input text. Each fact names the chunk it came from."""
    text = text.strip()
    if not text:
        return [], []
    if word_count(text) <= max_words:
        clean = " ".join(text.split())
        return [text], [SplitFact(clean, 0)]

    chunks: list[str] = []
    chunk_words = 0.0
    facts: list[SplitFact] = []
    for paragraph in _PARAGRAPH.split(text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        words = word_count(paragraph)
        if not chunks or chunk_words + words > chunk_max_words:
            chunks.append(paragraph)
            chunk_words = words
        else:
            chunks[-1] += "\n\n" + paragraph
            chunk_words += words
        group: list[str] = []
        group_words = 0
        pieces = [p for s in sentences(paragraph) for p in _cut_long(s, max_words)]
        for piece in pieces:
            n = _measure(piece)
            if group and group_words + n > max_words:
                facts.append(SplitFact(_join(group), len(chunks) - 1))
                group, group_words = [], 0
            group.append(piece)
            group_words += n
        if group:
            facts.append(SplitFact(_join(group), len(chunks) - 1))

    linked: list[SplitFact] = []
    for i, fact in enumerate(facts):
        causal = i > 0 and (_CAUSAL_START.match(fact.text) or _CAUSAL_INSIDE.search(fact.text))
        linked.append(SplitFact(fact.text, fact.chunk_index, i - 1 if causal else None))
    return chunks, linked
