"""Turning raw input (text, files, JSONL lines) into retain items and recall requests.

JSONL is validated whole before anything is written: a bad line fails the batch with its line
number (or is skipped and counted with --skip-invalid), so a failed import leaves the store as
it was.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from memcli.recall.types import ARMS, RecallOptions
from memcli.retain import RetainItem
from memcli.store import FACT_TYPES
from memcli.timeparse import parse_when


class InputError(ValueError):
    """Input that cannot be used (one-line message)."""


ITEM_KEYS = {"id", "text", "timestamp", "context", "tags", "type", "document_id", "metadata"}


def items_from_text(text: str, origin: str | None, defaults: dict[str, Any]) -> RetainItem:
    if not text.strip():
        raise InputError(f"{origin or 'text'} is empty: nothing to retain")
    _check_type(defaults.get("fact_type"), origin or "--type")
    return RetainItem(
        text=text,
        source_id=origin,
        timestamp=defaults.get("timestamp"),
        context=defaults.get("context"),
        tags=list(defaults.get("tags") or []),
        fact_type=defaults.get("fact_type"),
        document_id=defaults.get("document_id"),
    )


def _check_type(value: Any, where: str) -> None:
    if value is not None and value not in FACT_TYPES:
        raise InputError(f"{where}: unknown type {value!r} (use {', '.join(FACT_TYPES)})")


def item_from_json(obj: Any, defaults: dict[str, Any]) -> RetainItem:
    """One JSONL object -> RetainItem; raises ValueError with a short reason."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError('missing or empty "text"')
    timestamp = defaults.get("timestamp")
    if obj.get("timestamp") is not None:
        raw = obj["timestamp"]
        if not isinstance(raw, (str, int, float)):
            raise ValueError(f"bad timestamp {raw!r}")
        try:
            timestamp = parse_when(str(raw))
        except ValueError as exc:
            raise ValueError(f"bad timestamp: {exc}") from exc
    tags = obj.get("tags", defaults.get("tags") or [])
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValueError('"tags" must be a list of strings')
    fact_type = obj.get("type", defaults.get("fact_type"))
    if fact_type is not None and fact_type not in FACT_TYPES:
        raise ValueError(f"unknown type {fact_type!r}")
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ValueError('"metadata" must be an object')
    source_id = obj.get("id")
    document_id = obj.get("document_id", defaults.get("document_id"))
    context = obj.get("context", defaults.get("context"))
    return RetainItem(
        text=text,
        source_id=None if source_id is None else str(source_id),
        timestamp=timestamp,
        context=None if context is None else str(context),
        tags=tags,
        fact_type=fact_type,
        document_id=None if document_id is None else str(document_id),
        metadata=metadata,
    )


def _json_line(line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from exc


def items_from_jsonl(
    raw: str, defaults: dict[str, Any], skip_invalid: bool = False
) -> tuple[list[RetainItem], int]:
    """(items, number of invalid lines skipped). Blank lines are ignored."""
    items: list[RetainItem] = []
    invalid = 0
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(item_from_json(_json_line(line), defaults))
        except ValueError as exc:
            if skip_invalid:
                invalid += 1
                continue
            raise InputError(f"line {number}: {exc}") from exc
    return items, invalid


OPTION_KEYS = {
    "budget": str,
    "max_tokens": int,
    "limit": int,
    "types": list,
    "tags": list,
    "tags_match": str,
    "include_chunks": bool,
    "max_chunk_tokens": int,
    "rerank": bool,
    "boosts": bool,
    "min_score": float,
}


def recall_requests(
    raw: str, base: RecallOptions, default_bank: str
) -> list[tuple[Any, str, str, RecallOptions]]:
    """Parse a recall batch: (id, bank, query, options) per line; a line's own options win."""
    out = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = _json_line(line)
        except ValueError as exc:
            raise InputError(f"line {number}: {exc}") from exc
        if not isinstance(obj, dict) or not isinstance(obj.get("query"), str):
            raise InputError(f'line {number}: needs a "query" string')
        changes: dict[str, Any] = {}
        try:
            if obj.get("now") is not None:
                changes["now"] = parse_when(str(obj["now"]))
            for key, kind in OPTION_KEYS.items():
                if key in obj and obj[key] is not None:
                    value = obj[key]
                    if kind is float and isinstance(value, int):
                        value = float(value)
                    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                        raise ValueError(f'"{key}" must be {kind.__name__}')
                    changes[key] = value
            if "type" in obj:
                changes["types"] = [obj["type"]]
            if "arms" in obj:
                arms = obj["arms"]
                arms = arms.split(",") if isinstance(arms, str) else arms
                if not all(a in ARMS for a in arms):
                    raise ValueError(f"unknown arm in {arms!r}")
                changes["arms"] = tuple(arms)
        except ValueError as exc:
            raise InputError(f"line {number}: {exc}") from exc
        bank = obj.get("bank", default_bank)
        out.append((obj.get("id"), str(bank), obj["query"], replace(base, **changes)))
    return out
