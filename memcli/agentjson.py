"""What an agent receives from `mem mcp`: compact JSON that fits the token budget as sent.

A recall whose `total_tokens` said 4096 reached the agent as 37,717 tokens: indented JSON with
every field, once as text content and again as structured content. Here each answer is one
line of compact JSON, sent twice (the text block and structuredContent carry the same
object, as MCP asks for clients that read only one), and the two together are counted with
the project's tokenizer (cl100k, memcli/tokens.py) on exactly the text sent. Items go in best
first while the whole fits; `fit` then checks the exact count of the whole and drops from
the end until it fits.

Compact by default: the fields an agent acts on (id, text, speaker, when said, the time it
talks about, score), keys whose value is null or empty left out; `detail` gives every field of
the CLI's JSON. Either way the budget holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# How many times the answer's JSON is sent: the text block and structuredContent.
COPIES = 2

# The fields a compact fact keeps (when they have a value), in this order.
COMPACT_FACT = (
    "id",
    "text",
    "context",
    "mentioned_at",
    "occurred_start",
    "occurred_end",
    "tags",
    "document_id",
    "invalid_at",
    "superseded_by",
    "score",
    "possibly_supersedes",
)


def dumps(obj: Any) -> str:
    """The one line of JSON sent (compact, UTF-8 as is: what the SDK writes)."""
    from memcli.render import dumps as compact

    return compact(obj)


def sent_tokens(obj: Any) -> int:
    """Tokens an agent receives for this answer: its JSON, as text and as structuredContent."""
    from memcli.tokens import count_tokens

    return COPIES * count_tokens(dumps(obj))


def compact(fields: dict[str, Any], keep: tuple[str, ...] = COMPACT_FACT) -> dict[str, Any]:
    """A fact's JSON reduced to what an agent needs; nulls and empty lists left out."""
    out = {}
    for key in keep:
        value = fields.get(key)
        if value is None or value == [] or value == {}:
            continue
        out[key] = round(value, 3) if key == "score" and isinstance(value, float) else value
    return out


class BudgetTooSmall(ValueError):
    """max_tokens cannot hold the answer's frame and its first item."""

    def __init__(self, max_tokens: int, need: int) -> None:
        super().__init__(
            f"max_tokens {max_tokens} cannot hold this answer with one item: give at least {need}"
        )
        self.need = need


def fit(
    head: dict[str, Any],
    key: str,
    items: list[dict[str, Any]],
    max_tokens: int,
    *,
    skip: bool = True,
    finish: Callable[[dict[str, Any], int], None] | None = None,
    required: bool = True,
) -> tuple[dict[str, Any], int]:
    """(answer, n): `head` with `key` holding the n items that fit max_tokens as sent. With
    skip=False they are the first n of `items` (a page: the next one starts after them);
    with skip=True an item too big is passed over and the next ones tried, as recall fills
    its budget. `finish(answer, omitted)` may add fields that depend
    on what was kept (counted too). Raises BudgetTooSmall when there are items and not even
    the first fits beside the head; with required=False (the answer to a write that has
    happened: what it wrote must be said, whatever the budget) it gives the head alone."""
    from memcli.tokens import count_tokens

    def whole(kept: list[dict[str, Any]]) -> dict[str, Any]:
        answer = {**head, key: kept}
        if finish is not None:
            finish(answer, len(items) - len(kept))
        return answer

    frame = sent_tokens(whole([]))
    if frame > max_tokens:
        if not required:
            return whole([]), 0
        raise BudgetTooSmall(max_tokens, frame)
    room = max_tokens - frame
    kept: list[dict[str, Any]] = []
    for item in items:
        cost = COPIES * (count_tokens(dumps(item)) + 1)  # and its comma
        if cost <= room:
            kept.append(item)
            room -= cost
        elif not skip:
            break
    answer = whole(kept)
    while kept and sent_tokens(answer) > max_tokens:  # the parts' counts were close, not exact
        kept.pop()
        answer = whole(kept)
    if items and not kept and required:
        raise BudgetTooSmall(max_tokens, sent_tokens(whole(items[:1])))
    return answer, len(kept)
