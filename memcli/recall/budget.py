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
    at_least: Callable[[Candidate], int] | None = None,
) -> tuple[list[Candidate], int]:
    """(kept candidates in order, tokens used). `floor` is the fewest tokens any candidate
    can take: once less room is left, no later one can fit, so filling stops there instead
    of formatting and counting the hundreds of candidates below the cut. `at_least(c)`, no
    more than count_tokens(c) and cheaper: a candidate that cannot fit even so is passed
    without being counted (once the budget is nearly full, most are)."""
    kept: list[Candidate] = []
    used = 0
    for cand in ranked:
        if limit is not None and len(kept) >= limit:
            break
        if max_tokens - used < floor:
            break
        if min_score is not None and cand.final < min_score:
            break
        if at_least is not None and used + at_least(cand) > max_tokens:
            continue
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


def fit_frame(
    result_kept: list[Candidate],
    ranked: list[Candidate],
    max_tokens: int,
    frame_tokens: int,
    count_tokens: Callable[[Candidate], int],
    limit: int | None = None,
    min_score: float | None = None,
) -> list[Candidate]:
    """What the text output shows: `result_kept` (fit()'s choice) when it fits max_tokens
    with the output's frame paid (a header of frame_tokens and one token for the blank line
    before each block), else fit()'s choice from `ranked` for the room the frame leaves, each
    block a token dearer. Candidates are not changed (JSON reports the blocks' own tokens)."""
    if frame_tokens + sum(count_tokens(c) + 1 for c in result_kept) <= max_tokens:
        return list(result_kept)
    out: list[Candidate] = []
    used = frame_tokens
    for cand in ranked:
        if limit is not None and len(out) >= limit:
            break
        if min_score is not None and cand.final < min_score:
            break
        cost = count_tokens(cand) + 1
        if used + cost <= max_tokens:
            out.append(cand)
            used += cost
    return out
