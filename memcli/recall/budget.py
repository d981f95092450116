"""Fit the best memories into a token budget.

Unlike the reference (which stops at the first fact that does not fit), a fact too big for the
space left is skipped and filling goes on with the next ones.
"""

from __future__ import annotations

from collections.abc import Callable

from memcli.recall.types import Candidate


def fit(
    ranked: list[Candidate],
    max_tokens: int,
    count_tokens: Callable[[Candidate], int],
    limit: int | None = None,
    min_score: float | None = None,
    floor: int = 1,
) -> tuple[list[Candidate], int]:
    """(kept candidates in order, tokens used). `floor` is the fewest tokens any candidate
    can take: once less room is left, no later one can fit, so filling stops there instead
    of formatting and counting the hundreds of candidates below the cut."""
    kept: list[Candidate] = []
    used = 0
    for cand in ranked:
        if limit is not None and len(kept) >= limit:
            break
        if max_tokens - used < floor:
            break
        if min_score is not None and cand.final < min_score:
            break
        cand.tokens = count_tokens(cand)
        if used + cand.tokens > max_tokens:
            continue
        kept.append(cand)
        used += cand.tokens
    return kept, used


def block_floor() -> int:
    """The fewest tokens a memory block (blocks.memory_block) can take: it starts with a
    bracketed day, "[YYYY-MM-DD", and has at least one character of text after "] "."""
    from memcli.tokens import count_tokens_any_digits

    return count_tokens_any_digits("[2026-01-01]") + 1


def fit_texts(
    texts: list[str],
    max_tokens: int,
    count: Callable[[str], int],
    truncate: Callable[[str, int], str],
) -> list[str]:
    """Whole texts while they fit, then the next one truncated to the space left."""
    out: list[str] = []
    used = 0
    for text in texts:
        n = count(text)
        if used + n <= max_tokens:
            out.append(text)
            used += n
            continue
        room = max_tokens - used
        if room > 0:
            out.append(truncate(text, room))
        break
    return out


def fit_frame(kept: list[Candidate], max_tokens: int, frame_bytes: int) -> list[Candidate]:
    """The best of `kept` that still fit max_tokens once the text output's frame is paid: a
    header of frame_bytes UTF-8 bytes (a cl100k token is at least one byte, so this bounds the
    header's tokens without loading the encoding for a query's words) and one token for the
    blank line before each block. The lowest ranked go first."""
    out = list(kept)
    used = frame_bytes + sum(c.tokens + 1 for c in out)
    while out and used > max_tokens:
        used -= out.pop().tokens + 1
    return out
