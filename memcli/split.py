"""Splitting input text into chunks (kept raw for --include-chunks) and facts (what is recalled).

No LLM: a short text (a dialog turn, a note) is one fact; a longer one is cut at sentence
boundaries into facts of a few sentences, so each fact still reads on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PARAGRAPH = re.compile(r"\n\s*\n")
# End of sentence: .!? followed by space and a plausible sentence start, or CJK full stops.
_SENTENCE_END = re.compile(
    r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9\u00c0-\u024f])|(?<=[。！？])"
)
_CJK_CHARS = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
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


def word_count(text: str) -> int:
    """Words, counting two CJK characters as one word (CJK has no spaces)."""
    cjk = len(_CJK_CHARS.findall(text))
    return len(text.split()) + cjk // 2


def sentences(text: str) -> list[str]:
    out: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        paragraph = " ".join(paragraph.split())
        if paragraph:
            out.extend(s.strip() for s in _SENTENCE_END.split(paragraph) if s and s.strip())
    return out


def _cut_long(sentence: str, max_words: int) -> list[str]:
    words = sentence.split()
    if len(words) <= max_words:
        return [sentence]
    return [" ".join(words[i : i + max_words]) for i in range(0, len(words), max_words)]


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
    chunk_words = 0
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
            n = word_count(piece)
            if group and group_words + n > max_words:
                facts.append(SplitFact(" ".join(group), len(chunks) - 1))
                group, group_words = [], 0
            group.append(piece)
            group_words += n
        if group:
            facts.append(SplitFact(" ".join(group), len(chunks) - 1))

    linked: list[SplitFact] = []
    for i, fact in enumerate(facts):
        causal = i > 0 and (_CAUSAL_START.match(fact.text) or _CAUSAL_INSIDE.search(fact.text))
        linked.append(SplitFact(fact.text, fact.chunk_index, i - 1 if causal else None))
    return chunks, linked
