"""Recall results as text (for `| llm`), Markdown, JSON, and the trace table."""

from __future__ import annotations

import json
from typing import Any

import orjson

from memcli.blocks import memory_block, said_and_about
from memcli.clock import utc_to_local
from memcli.display import one_line, terminal_safe
from memcli.recall.types import (  # noqa: F401 (the JSON contract, re-exported)
    Candidate,
    RecallResult,
    candidate_json,
    to_json_obj,
    trace_obj,
    window_json,
)
from memcli.store import iso


def use_color(stream: Any = None) -> bool:
    """ANSI styling only on a terminal, and never with NO_COLOR set or TERM=dumb
    (https://no-color.org)."""
    import os
    import sys

    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


_LEGEND = " (said: when it was said; about: the time it talks about)"


# How much of the query a header echoes: a long question (a pasted paragraph, a 3,000-word
# prompt) took the whole token budget in the header and left no room for one memory.
ECHO_CHARS = 200


def echoed_query(query: str) -> str:
    """The query as a header shows it: one line, cut at ECHO_CHARS with an ellipsis."""
    line = one_line(query)
    return line if len(line) <= ECHO_CHARS else line[: ECHO_CHARS - 1].rstrip() + "…"


def text_header(result: RecallResult, results: list[Candidate] | None = None) -> str:
    """The first line: what was asked and the reference time, so a model can tell past from
    future; the legend only when some memory carries both dates."""
    query = terminal_safe(echoed_query(result.query))
    day = utc_to_local(result.now).date().isoformat()  # the user's day, as blocks show
    head = f'Memories relevant to "{query}", as of {day}'
    shown = result.results if results is None else results
    if any(memory_block(c.fact).startswith("[said ") for c in shown):
        head += _LEGEND
    return head + ":"


def text_results(result: RecallResult) -> list[Candidate]:
    """The memories the text output shows: those the budget kept, while the whole text
    (header and blank lines too) fits --max-tokens."""
    from memcli.recall.budget import fit_frame

    # The header of all of them is the longest any subset gets (the legend only if some
    # memory needs it). Its UTF-8 bytes bound its tokens without loading the tokenizer
    # (~0.1 s of a cold recall), and a roomy budget (8 times the bound or more) is filled
    # with that bound. A tighter one, or a roomy one it leaves empty, counts the header; the
    # room it leaves is capped at the roomy budgets' smallest (7 times the bound), so more
    # room never means less for the memories.
    header = text_header(result) + "\n\n"
    frame = len(header.encode("utf-8"))
    budget = result.max_tokens
    if frame + sum(printed_tokens(c) + 1 for c in result.results) <= budget:
        return list(result.results)

    def fill(frame_tokens: int) -> list[Candidate]:
        return fit_frame(
            result.results,
            result.ranked,
            budget,
            frame_tokens,
            printed_tokens,
            result.limit,
            result.min_score,
        )

    if budget >= 8 * frame:
        shown = fill(frame)
        if shown:
            return shown
    from memcli.tokens import count_tokens

    exact = count_tokens(header)
    return fill(exact if budget >= 8 * frame else max(exact, budget - 7 * frame))


def printed_tokens(c: Candidate) -> int:
    """Tokens of a memory's block as the text formats print it: the stored count, unless the
    text holds control characters, which print as escapes ("\\x1b": four characters)."""
    from memcli.blocks import block_tokens
    from memcli.display import prints_as_is

    f = c.fact
    if prints_as_is(f.text) and (f.context is None or prints_as_is(f.context)):
        # The date part never needs escapes; fit() has counted the blocks it looked at.
        return c.tokens or block_tokens(f)
    from memcli.tokens import count_tokens

    return count_tokens(terminal_safe(memory_block(f)))


def header_tokens(result: RecallResult) -> int:
    """Tokens of the text output's header line and the blank line after it."""
    from memcli.tokens import count_tokens

    return count_tokens(text_header(result) + "\n\n")


def to_text(result: RecallResult, decorate: bool = False, color: bool | None = None) -> str:
    """The memories for a reader or a model: a header line with the reference time, then one
    block per memory. `decorate` (a terminal) adds each memory's rank and score, dimmed when
    color is on (default: use_color())."""
    results = text_results(result)
    if not results:
        return ""
    if color is None:
        color = decorate and use_color()
    blocks = []
    for i, c in enumerate(results, start=1):
        block = terminal_safe(memory_block(c.fact))
        if decorate:
            mark = f"{i:>2}. ({c.final:.3f})"
            block = f"\x1b[2m{mark}\x1b[0m {block}" if color else f"{mark} {block}"
        blocks.append(block)
    out = text_header(result, results) + "\n\n" + "\n\n".join(blocks)
    if result.chunks:
        out += "\n\n" + "\n\n".join(
            f"--- source chunk\n{terminal_safe(ch['text'])}" for ch in result.chunks
        )
    return out


def to_markdown(result: RecallResult) -> str:
    """The memories as a Markdown list; heading and list fit --max-tokens as the text output
    does (the lowest ranked go first; the chunks have their own --max-chunk-tokens)."""
    from memcli.recall.budget import fit_frame

    query = echoed_query(result.query)
    day = utc_to_local(result.now).date().isoformat()
    head = [f"## Memories for: {query}", "", f"As of {day}.", ""]
    # As the text output does: the heading is paid first, and when the budget's memories
    # do not fit beside it the room left is filled from the ranked list (a tight budget
    # failed here where the text output printed a memory). Counted as printed: control
    # characters show as escapes; the whole is counted again below, exactly.
    chosen = fit_frame(
        result.results,
        result.ranked,
        result.max_tokens,
        _tokens(terminal_safe("\n".join(head))),
        lambda c: _tokens(terminal_safe(_markdown_item(c))),
        result.limit,
        result.min_score,
    )
    items = [_markdown_item(c) for c in chosen]
    while items and _tokens(terminal_safe("\n".join(head + items))) > result.max_tokens:
        items.pop()
    if (result.results and not items) or _tokens(terminal_safe("\n".join(head))) > (
        result.max_tokens
    ):
        return ""  # the budget cannot hold the heading and a memory (the CLI says so)
    lines = head + items
    if result.chunks:
        lines += ["", "### Source chunks", ""]
        for ch in result.chunks:
            lines += ["```text", ch["text"], "```", ""]
    return terminal_safe("\n".join(lines).rstrip() + "\n")


def _markdown_item(c: Candidate) -> str:
    f = c.fact
    who = f"**{one_line(f.context)}:** " if f.context else ""
    return f"- *{said_and_about(f)}* {who}{f.text}"


def _tokens(text: str) -> int:
    from memcli.tokens import count_tokens

    return count_tokens(text)


def to_trace_table(
    result: RecallResult, width: int = 60, shown: list[Candidate] | None = None
) -> str:
    """The human trace: each result's rank in every arm (blank where the arm missed it), its
    RRF score, reranker score, each boost and the final score; then the window and timings.
    `shown`: the memories the text output printed (text_results), when they are not the
    budget's results (a tight budget, the header line paid first)."""
    if shown is not None and [c.fact_id for c in shown] == [c.fact_id for c in result.results]:
        shown = None  # the usual case: the text printed the budget's results
    printed = result.results if shown is None else shown
    head = (
        f"{'#':>3} {'id':>6} {'sem':>4} {'kw':>4} {'grph':>4} {'temp':>4} {'rrf':>7} "
        f"{'reply':>5} {'fused':>6} {'fus#':>4} {'rerank':>7} {'recncy':>6} {'tempo':>6} "
        f"{'proof':>6} {'spkr':>6} {'final':>7}  text"
    )
    lines = [head, "-" * len(head)]

    def rank(v: int | None) -> str:
        return "" if v is None else str(v)

    for c in printed:
        rr = "" if c.reranker is None else f"{c.reranker:.4f}"
        text = c.fact.text.replace("\n", " ")
        if len(text) > width:
            text = text[: width - 1] + "…"
        lines.append(
            f"{c.final_rank:>3} {c.fact_id:>6} {rank(c.ranks.get('semantic')):>4} "
            f"{rank(c.ranks.get('keyword')):>4} {rank(c.ranks.get('graph')):>4} "
            f"{rank(c.ranks.get('temporal')):>4} {c.rrf:>7.4f} {c.reply:>5.3f} {c.fused:>6.3f} "
            f"{c.rrf_rank:>4} {rr:>7} "
            f"{c.recency:>6.3f} {c.temporal:>6.3f} {c.proof:>6.3f} "
            f"{c.speaker:>6.3f} {c.final:>7.4f}  {text}"
        )
    lines.append("")
    scores = (
        f"reranker: {result.reranker}"
        if result.reranker
        else "reranker: none - base scores are synthetic: fusion score / the best one's"
    )
    lines.append(scores)
    window = result.time_window
    lines.append(
        "time window: "
        + (f"{iso(window.start)} .. {iso(window.end)}" if window else "none (query names no time)")
    )
    arms = ", ".join(f"{name} {len(arm.hits)}" for name, arm in result.arms.items())
    lines.append(
        f"candidates: {arms}; fused {len(result.ranked)}; per-arm limit "
        f"{result.notes.get('candidates_per_arm')}; rerank cap {result.notes.get('rerank_cap')}"
    )
    named = result.notes.get("speakers_named")
    lines.append(f"speakers named: {', '.join(named) if named else 'none'}")
    vector_query = result.notes.get("vector_query")
    if vector_query and vector_query != result.query:
        lines.append(f"searched by the vectors of: the whole query and {vector_query!r}")
    emb = result.notes.get("embedder")
    if emb:
        fp = (emb["fingerprint"] or "")[:12]
        lines.append(f"embedder: {emb['name']} ({fp}, languages {emb['languages'] or 'unknown'})")
    else:
        lines.append("embedder: none (no vector arm ran)")
    weights = result.notes.get("fusion_weights") or {}
    reason = result.notes.get("fusion_weights_reason")
    lines.append(
        "fusion weights: "
        + ", ".join(f"{name} {w:g}" for name, w in weights.items())
        + (f" ({reason})" if reason else "")
    )
    kw = result.arms.get("keyword")
    if kw is not None:
        lines.append(f"keyword terms: {' '.join(kw.notes.get('terms', [])) or '(none)'}")
    tmp = result.arms.get("temporal")
    if tmp is not None and tmp.notes.get("entry_points"):
        lines.append(f"temporal entry points: {tmp.notes['entry_points']}")
    lines.append(
        (
            f"budget: {result.total_tokens}/{result.max_tokens} tokens, "
            f"{len(result.results)} of {len(result.ranked)} candidates kept"
        )
        if shown is None
        else (
            f"budget: {result.max_tokens} tokens with the header line: {len(shown)} of "
            f"{len(result.ranked)} candidates printed"
        )
    )
    lines.append(
        "time (ms): " + ", ".join(f"{k} {v * 1000:.1f}" for k, v in result.timings.items())
    )
    return terminal_safe("\n".join(lines))


def sources_json(sources: dict[str, Any]) -> dict[str, Any]:
    """Each setting the command resolved (memcli/config.py Setting) as {value, source}."""
    return {k: {"value": s.value, "source": s.source} for k, s in sources.items()}


def sources_text(sources: dict[str, Any]) -> str:
    """The trace's settings line: where each value came from (flag > env > config > default)."""
    parts = [
        f"{k}={'unset' if s.value is None else s.value} ({s.source})" for k, s in sources.items()
    ]
    return "settings: " + ", ".join(parts)


def dumps(obj: Any) -> str:
    """obj as one line of JSON, UTF-8 as it is (not escaped to ASCII). orjson writes a
    recall's answer of ~120 memories in 0.08 ms where json took 0.62: the last step of every
    warm --batch answer."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        # What orjson refuses and json writes: a lone surrogate (in text stored before input
        # was checked), an integer beyond 64 bits. Compact too: every line of a --batch
        # looks alike.
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
