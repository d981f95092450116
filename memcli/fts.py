"""Text as the FTS5 index sees it, and user queries turned into safe FTS5 MATCH expressions.

FTS5's unicode61 tokenizer splits on spaces and punctuation, so a run of Chinese, Japanese or
Korean characters would become one giant token that no query matches. The indexed text
therefore puts each CJK character apart (one token per character), and a CJK run in a query
becomes search terms over those characters:

- "both" (default): each character, and each overlapping pair of characters as a two-character
  phrase. The characters find memories that share a word's parts with the question (睡眠 /
  睡不着, 이름은 / 이름이); the pairs, rarer and so weighted higher by BM25, put the memories
  with the question's exact words first. CJK has no spaces, and a fixed n-gram needs no
  dictionary for any of the three languages.
- "bigram": the pairs only; "unigram": the characters only; "trigram": three-character
  phrases (as FTS5's trigram tokenizer would match).

Measured on bench/data/cjk-dev.jsonl (keyword arm alone, R@10 / MRR, bench/RESULTS.md):
both 0.81 / 0.68, unigram 0.81 / 0.69, bigram 0.76 / 0.66, trigram 0.52 / 0.47; a Chinese
segmenter (jieba 0.42.1) for Chinese queries 0.74 / 0.66, and it costs ~1 s to load.

User text never reaches FTS5 syntax: every term is a double-quoted string with quotes doubled,
so `AND`, `NEAR`, `*`, `:`, `-`, parentheses and quotes are plain words or dropped punctuation.
"""

from __future__ import annotations

import re

# Han, Hiragana, Katakana, Hangul syllables and jamo, CJK compatibility and fullwidth forms.
_CJK = (
    "\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
)
_CJK_CHAR = re.compile(f"([{_CJK}])")
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")

# Common English function words: they match almost every memory and only add noise to BM25.
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll
    i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor
    not of off on once only or other ought our ours ourselves out over own same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them themselves
    then there there's these they they'd they'll they're they've this those through to too under
    until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's which while who who's whom why why's with won't would wouldn't you you'd you'll
    you're you've your yours yourself yourselves also just did does get got tell know
    """.split()
)


def index_text(text: str) -> str:
    """The form of `text` stored in the FTS5 index."""
    return _CJK_CHAR.sub(r" \1 ", text)


CJK_TERM_MODES = ("both", "bigram", "unigram", "trigram")


def query_terms(query: str, cjk: str = "both") -> list[str]:
    """Distinct search terms of a query, lower-cased, stop words dropped, in query order.

    A CJK run becomes terms by `cjk` (see the module docstring): its characters and their
    overlapping pairs by default, each pair matched later as a two-character phrase."""
    if cjk not in CJK_TERM_MODES:
        raise ValueError(f"unknown CJK term mode {cjk!r} (use {', '.join(CJK_TERM_MODES)})")
    terms: list[str] = []
    seen: set[str] = set()
    for match in _WORD.finditer(query):
        word = match.group(0).lower().replace("’", "'")
        for piece in _split_cjk(word, cjk):
            if piece in seen or piece in STOP_WORDS:
                continue
            if len(piece) == 1 and not _CJK_RUN.fullmatch(piece) and not piece.isdigit():
                continue
            seen.add(piece)
            terms.append(piece)
    return terms


def _cjk_terms(run: str, mode: str) -> list[str]:
    """Search terms of one run of CJK characters."""
    if mode == "unigram" or len(run) == 1:
        return list(run)
    size = 3 if mode == "trigram" else 2
    grams = [run] if len(run) <= size else [run[i : i + size] for i in range(len(run) - size + 1)]
    return list(run) + grams if mode == "both" else grams


def _split_cjk(word: str, mode: str = "both") -> list[str]:
    """Split a token into its CJK runs and the non-CJK parts around them."""
    if not _CJK_RUN.search(word):
        return [word]
    parts: list[str] = []
    last = 0
    for m in _CJK_RUN.finditer(word):
        if m.start() > last:
            parts.append(word[last : m.start()])
        parts.append(m.group(0))
        last = m.end()
    if last < len(word):
        parts.append(word[last:])
    out: list[str] = []
    for part in parts:
        if _CJK_RUN.fullmatch(part):
            out.extend(_cjk_terms(part, mode))
        elif part:
            out.append(part)
    return out


def cjk_runs(text: str) -> list[str]:
    """The runs of CJK characters in text."""
    return _CJK_RUN.findall(text)


def is_cjk(term: str) -> bool:
    """True for a term made only of CJK characters."""
    return _CJK_RUN.fullmatch(term) is not None


def term_expression(term: str) -> str:
    """One term as a quoted FTS5 string; a CJK run becomes a phrase of its characters."""
    body = " ".join(term) if _CJK_RUN.fullmatch(term) else term
    return '"' + body.replace('"', '""') + '"'


def match_expression(terms: list[str]) -> str | None:
    """OR of the quoted terms, or None when nothing searchable is left."""
    if not terms:
        return None
    return " OR ".join(term_expression(t) for t in terms)
