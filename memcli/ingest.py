"""Turning raw input (text, files, JSONL lines) into retain items and recall requests.

JSONL is validated whole before anything is written: a bad line fails the batch with its line
number (or is skipped and counted with --skip-invalid), so a failed import leaves the store as
it was.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from typing import Any

from memcli.display import NO_WORDS, has_searchable_text, has_visible_text
from memcli.errors import MemError
from memcli.recall.types import ARMS, RecallOptions
from memcli.retain import RetainError, RetainItem, check_item
from memcli.store import FACT_TYPES, INT64_MAX, check_bank_name
from memcli.timeparse import parse_when


class InputError(MemError, ValueError):
    """Input that cannot be used (one-line message)."""


ITEM_KEYS = {"id", "text", "timestamp", "context", "tags", "type", "document_id", "metadata"}


def items_from_text(text: str, origin: str | None, defaults: dict[str, Any]) -> RetainItem:
    if not text.strip():
        raise InputError(f"{origin or 'text'} is empty: nothing to retain")
    _check_type(defaults.get("fact_type"), origin or "type")
    item = RetainItem(
        text=text,
        source_id=origin,
        timestamp=defaults.get("timestamp"),
        context=defaults.get("context"),
        tags=list(defaults.get("tags") or []),
        fact_type=defaults.get("fact_type"),
        document_id=defaults.get("document_id"),
    )
    try:
        return check_item(item)
    except RetainError as exc:
        # A file's problems are prefixed with its name; the message names the field ("tag
        # is empty", not "text: a tag is empty" for a text given as an argument or a tool's).
        message = str(exc)
        if origin is None or message.startswith(f"{origin} "):
            raise InputError(message) from None
        raise InputError(f"{origin}: {message}") from None


def _check_type(value: Any, where: str) -> None:
    if value is not None and value not in FACT_TYPES:
        raise InputError(f"{where}: unknown type {value!r} (use {', '.join(FACT_TYPES)})")


def item_from_json(obj: Any, defaults: dict[str, Any]) -> RetainItem:
    """One JSONL object -> RetainItem; raises ValueError with a short reason."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    unknown = sorted(set(obj) - ITEM_KEYS)
    if unknown:
        raise ValueError(
            f"unknown key {unknown[0]!r} (keys: {', '.join(sorted(ITEM_KEYS))}; "
            'put anything else in "metadata")'
        )
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
    tags = _given(obj, "tags", defaults.get("tags") or [])
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValueError('"tags" must be a list of strings')
    fact_type = _given(obj, "type", defaults.get("fact_type"))
    if fact_type is not None and fact_type not in FACT_TYPES:
        raise ValueError(f"unknown type {fact_type!r}")
    metadata = obj.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict):  # 0, false, [] and "" are no object either
        raise ValueError('"metadata" must be an object')
    source_id = _scalar(obj, "id", None)
    document_id = _scalar(obj, "document_id", defaults.get("document_id"))
    context = _given(obj, "context", defaults.get("context"))
    if context is not None and not isinstance(context, str):
        raise ValueError('"context" must be a string')
    item = RetainItem(
        text=text,
        source_id=source_id,
        timestamp=timestamp,
        context=context,
        tags=tags,
        fact_type=fact_type,
        document_id=document_id,
        metadata=metadata,
        id_given=source_id is not None,
    )
    try:
        return check_item(item)
    except RetainError as exc:
        raise ValueError(str(exc)) from None


def _given(obj: dict, key: str, default: Any) -> Any:
    """A field's value; null is a field not given, as for "timestamp" (the flag's value)."""
    value = obj.get(key)
    return default if value is None else value


def _scalar(obj: dict, key: str, default: Any) -> str | None:
    """An id field: a string, or a number taken as its decimal form."""
    value = _given(obj, key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f'"{key}" must be a string or an integer')
    return str(value)


def jsonl_lines(raw: str) -> list[str]:
    """The lines of a JSONL text. Only "\\n" ends a line ("\\r\\n" leaves a "\\r", which JSON
    reads as whitespace): str.splitlines() also cuts at U+2028, U+2029 and U+0085, which JSON
    allows raw inside a string."""
    return raw.split("\n")


def _json_line(line: str) -> Any:
    bad = _BAD_BYTE.search(line)
    if bad is not None:
        byte = ord(bad.group()) - 0xDC00
        raise ValueError(f"not UTF-8 text (byte 0x{byte:02X} at column {bad.start() + 1})")
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from exc
    except ValueError:  # Python's limit on the digits of an integer it converts
        raise ValueError("a number is too long (over 4,300 digits)") from None
    except RecursionError:
        raise ValueError("not JSON this program can read: nested too deeply") from None


# A byte that is not UTF-8, as decode_lines keeps it (errors="surrogateescape"). Valid UTF-8
# never decodes to these code points, so one found in a line is that line's bad byte.
_BAD_BYTE = re.compile("[\udc80-\udcff]")


def decode_lines(data: bytes) -> str:
    """A JSONL file's bytes as text, a byte that is not UTF-8 kept for _json_line to report
    with its line (and for --skip-invalid to skip), where decoding the whole file failed on
    it. A byte order mark is no part of the text."""
    return data.decode("utf-8-sig", errors="surrogateescape")


def items_from_jsonl(
    raw: str, defaults: dict[str, Any], skip_invalid: bool = False
) -> tuple[list[RetainItem], int]:
    """(items, number of invalid lines skipped). Blank lines are ignored."""
    items: list[RetainItem] = []
    invalid = 0
    for number, line in enumerate(jsonl_lines(raw), start=1):
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


REQUEST_KEYS = {"id", "query", "now", "bank", "type", "arms", *OPTION_KEYS}


def _check_text(value: str, what: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} contains an invalid character (a lone surrogate)") from None


def _string_list(value: Any, key: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f'"{key}" must be a string or a list of strings')
    for v in value:
        _check_text(v, f'"{key}"')
    return value


def recall_request(
    obj: Any, base: RecallOptions, default_bank: str
) -> tuple[Any, str, str, RecallOptions]:
    """One recall request object -> (id, bank, query, options); raises ValueError naming the
    bad key. A request's own options win over `base`."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    unknown = sorted(set(obj) - REQUEST_KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (keys: {', '.join(sorted(REQUEST_KEYS))})")
    query = obj.get("query")
    if not isinstance(query, str) or not has_visible_text(query):
        raise ValueError('needs a "query" string with some text (not only spaces or controls)')
    if not has_searchable_text(query):
        raise ValueError(f'"query": {NO_WORDS}')
    _check_text(query, '"query"')
    changes: dict[str, Any] = {}
    if obj.get("now") is not None:
        if not isinstance(obj["now"], str):
            raise ValueError('"now" must be a date string')
        changes["now"] = parse_when(obj["now"])
    for key, kind in OPTION_KEYS.items():
        if key in obj and obj[key] is not None:
            value = obj[key]
            if kind is list:
                changes[key] = _string_list(value, key)
                continue
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                try:
                    value = float(value)
                except OverflowError:  # an integer beyond any float: 1 followed by 400 zeros
                    value = math.inf
            if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
                raise ValueError(f'"{key}" must be {_KIND_NAMES[kind]}')
            if isinstance(value, str):
                _check_text(value, f'"{key}"')
            if kind is float and not math.isfinite(value):
                raise ValueError(f'"{key}" must be a finite number, not {value}')
            if kind is int and not -INT64_MAX - 1 <= value <= INT64_MAX:
                raise ValueError(f'"{key}" is out of range')
            changes[key] = value
    if obj.get("type") is not None:
        changes["types"] = _string_list(obj["type"], "type")
    if obj.get("arms") is not None:
        arms = obj["arms"]
        arms = arms.split(",") if isinstance(arms, str) else arms
        if not isinstance(arms, list) or not all(isinstance(a, str) for a in arms):
            raise ValueError('"arms" must be a comma-separated string or a list of arm names')
        arms = [a.strip() for a in arms]
        bad = [a for a in arms if a not in ARMS]
        if bad or not arms:
            raise ValueError(f"unknown arm {bad[0] if bad else ''!r} (use {', '.join(ARMS)})")
        changes["arms"] = tuple(arms)
    bank = obj.get("bank", default_bank)
    if not isinstance(bank, str):
        raise ValueError('"bank" must be a string')
    check_bank_name_value(bank)
    request_id = obj.get("id")
    if request_id is not None and not isinstance(request_id, (str, int)):
        raise ValueError('"id" must be a string or an integer')
    if isinstance(request_id, str):
        _check_text(request_id, '"id"')
    return request_id, bank, query, replace(base, **changes)


_KIND_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def check_bank_name_value(bank: str) -> None:
    from memcli.store import StoreError

    try:
        check_bank_name(bank)
    except StoreError as exc:
        raise ValueError(str(exc)) from None


def recall_requests(
    raw: str, base: RecallOptions, default_bank: str
) -> list[tuple[Any, str, str, RecallOptions]]:
    """Parse and check a whole recall batch before any query runs: (id, bank, query,
    options) per line. A bad line fails the batch with its line number."""
    from memcli.recall.pipeline import RecallError, validate

    out = []
    for number, line in enumerate(jsonl_lines(raw), start=1):
        if not line.strip():
            continue
        try:
            request = recall_request(_json_line(line), base, default_bank)
            validate(request[3])
        except (ValueError, RecallError) as exc:
            raise InputError(f"line {number}: {exc}") from None
        out.append(request)
    return out
