"""Other tools' histories as documents to retain (`mem import --from FORMAT FILE`).

Formats (their shapes as the tools write them; tests/test_sources.py builds samples):
- chatgpt: ChatGPT's data export, conversations.json (or the export's .zip): a list of
  conversations, each {id | conversation_id, title, create_time, mapping: {node id:
  {message, parent, children}}, current_node}. The thread read is the one ending at
  current_node (the branch the user last saw), root first; system and tool messages,
  hidden ones and non-text parts are left out.
- claude: Claude's data export, conversations.json (or the .zip): a list of {uuid, name,
  created_at, chat_messages: [{uuid, sender: human | assistant, text, content: [{type:
  "text", text}], created_at}]}.
- mem0: mem0's memories as its API and library list them (a JSON list, or {"results":
  [...]}: {id, memory, created_at, updated_at, user_id, categories, metadata}) or as
  OpenMemory exports them (memories.json: {user, memories: [{id, content, state,
  created_at, ...}], categories}; the .zip, or memories.jsonl.gz).
- mcp-memory: the MCP reference "memory" server's memory.json, one JSON object a line:
  {"type": "entity", name, entityType, observations} and {"type": "relation", from, to,
  relationType}.
- jsonl: one message (or memory) a line: text from "text" / "content", the speaker from
  "context" / "speaker" / "role" / "author", the time from "timestamp" / "created_at",
  the conversation from "document_id" / "conversation_id" / "session_id"; or a whole
  conversation a line, {"id", "messages": [{role, content}]}.

Each conversation is a document (chatgpt/ID, claude/UUID; a mem0 user's memories,
mem0/USER; an MCP entity with its observations and relations, mcp-memory/NAME), with the
speakers as context and the messages' own times. A document is hashed from its items, so
importing the same file again skips every unchanged conversation and replaces the ones
that grew. A file that is not of the format, or malformed anywhere, fails whole with one
line that names the place (a line number, or a path such as [3].mapping.x.message), and
nothing is written.
"""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from memcli.errors import MemError
from memcli.retain import RetainItem
from memcli.sources import IMPORT_FORMATS as FORMATS
from memcli.sources.documents import SourceDocument, items_hash


class ImportFormatError(MemError, ValueError):
    """A file that is not of the format or is malformed (one line, naming the place)."""


# -- reading ------------------------------------------------------------------------------


def _unpacked(data: bytes, members: tuple[str, ...], name: str) -> bytes:
    """The bytes to read: a .zip's member (an export's conversations.json), a gzip file's
    content, else the bytes as they are."""
    if data[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                found = [n for n in zf.namelist() if n.rsplit("/", 1)[-1] in members]
                if not found:
                    raise ImportFormatError(f"{name} is a zip without {' or '.join(members)} in it")
                return zf.read(sorted(found, key=len)[0])
        except (zipfile.BadZipFile, OSError) as exc:
            raise ImportFormatError(f"{name} is not a readable zip file ({exc})") from None
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise ImportFormatError(f"{name} is not a readable gzip file ({exc})") from None
    return data


def _text(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(
            f"{name} is not UTF-8 text (bad byte at offset {exc.start})"
        ) from None


def _json(data: bytes, name: str) -> Any:
    text = _text(data, name)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"{name} is not JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ImportFormatError(f"{name} is not JSON this program can read ({exc})") from None


def _lines(data: bytes, name: str) -> list[tuple[int, Any]]:
    """(line number, object) of a JSON-lines file; blank lines skipped."""
    out = []
    for number, line in enumerate(_text(data, name).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            out.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise ImportFormatError(f"{name}: line {number}: not JSON ({exc.msg})") from None
        except (ValueError, RecursionError) as exc:
            raise ImportFormatError(f"{name}: line {number}: not JSON ({exc})") from None
    return out


def _json_lines(data: bytes) -> bool:
    """Whether data is JSON lines (objects one after another), not one JSON value."""
    try:
        json.loads(data.decode("utf-8-sig", errors="replace"))
    except json.JSONDecodeError as exc:
        return exc.msg == "Extra data" and data.lstrip()[:1] == b"{"
    except (ValueError, RecursionError):
        return False
    return False


class _Bad(ValueError):
    """A malformed value at a place (made into ImportFormatError with the file's name)."""


def _need(value: Any, kind: type | tuple[type, ...], where: str, what: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise _Bad(f"{where}: {what}")
    return value


def _str_or_none(value: Any, where: str) -> str | None:
    if value is None:
        return None
    return _need(value, str, where, "must be a string")


def _when(value: Any, where: str) -> datetime | None:
    """A time as exports write it: epoch seconds (ChatGPT), ISO 8601 text (Claude, mem0)."""
    from memcli.timeparse import parse_when

    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(float(value), tz=timezone.utc).replace(tzinfo=None)
        except (OverflowError, OSError, ValueError):
            raise _Bad(f"{where}: {value!r} is not a time") from None
    if isinstance(value, str):
        try:
            return parse_when(value)
        except ValueError:
            raise _Bad(f"{where}: {value!r} is not a time") from None
    raise _Bad(f"{where}: {value!r} is not a time")


def _document(doc_id: str, items: list[RetainItem], label: str) -> SourceDocument:
    return SourceDocument(doc_id, items_hash(items), items, label=label)


def read_import(data: bytes, name: str, fmt: str) -> list[SourceDocument]:
    """The documents of an export file. ImportFormatError (one line) for a file that is not
    of the format or is malformed."""
    reader: dict[str, Callable[[bytes, str], list[SourceDocument]]] = {
        "chatgpt": _chatgpt,
        "claude": _claude,
        "mem0": _mem0,
        "mcp-memory": _mcp_memory,
        "jsonl": _jsonl,
    }
    if fmt not in reader:
        raise ImportFormatError(f"unknown format {fmt!r} (use {', '.join(FORMATS)})")
    try:
        return reader[fmt](data, name)
    except _Bad as exc:
        raise ImportFormatError(f"{name}: {exc}") from None


# -- ChatGPT ------------------------------------------------------------------------------


def _looks_like(conv: Any) -> str:
    """A hint when a conversation is of another known export."""
    if isinstance(conv, dict) and "chat_messages" in conv:
        return " (this looks like Claude's export: use --from claude)"
    if isinstance(conv, dict) and "mapping" in conv:
        return " (this looks like ChatGPT's export: use --from chatgpt)"
    if isinstance(conv, dict) and ("memory" in conv or "content" in conv):
        return " (this looks like a list of memories: use --from mem0)"
    return ""


def _conversations(data: bytes, name: str, members: tuple[str, ...], key: str) -> list[Any]:
    obj = _json(_unpacked(data, members, name), name)
    if isinstance(obj, dict) and key in obj:
        obj = [obj]  # one conversation alone
    if not isinstance(obj, list):
        raise ImportFormatError(
            f"{name}: expected a JSON list of conversations, found {type(obj).__name__}"
            + _looks_like(obj)
        )
    return obj


def _thread(mapping: dict[str, Any], current: Any, where: str) -> list[tuple[str, Any]]:
    """The messages of the branch ending at current_node, root first (without one: from
    the root, each node's last child)."""
    for node_id, node in mapping.items():
        _need(node, dict, f"{where}.mapping.{node_id}", "must be an object")
    chain: list[str] = []
    seen: set[str] = set()
    if isinstance(current, str) and current in mapping:
        at: Any = current
        while isinstance(at, str) and at in mapping and at not in seen:
            seen.add(at)
            chain.append(at)
            at = mapping[at].get("parent")
        chain.reverse()
    else:
        roots = [k for k, n in mapping.items() if n.get("parent") not in mapping]
        at = roots[0] if roots else None
        while isinstance(at, str) and at in mapping and at not in seen:
            seen.add(at)
            chain.append(at)
            children = mapping[at].get("children") or []
            _need(children, list, f"{where}.mapping.{at}.children", "must be a list")
            at = children[-1] if children else None
    return [(k, mapping[k]) for k in chain]


def _chatgpt_text(content: Any, where: str) -> str | None:
    if content is None:
        return None
    _need(content, dict, f"{where}.content", "must be an object")
    if content.get("content_type") not in ("text", "multimodal_text"):
        return None  # code run, browsing, images, custom instructions: no message text
    parts = content.get("parts") or []
    _need(parts, list, f"{where}.content.parts", "must be a list")
    text = "\n".join(p for p in parts if isinstance(p, str)).strip()
    return text or None


def _chatgpt(data: bytes, name: str) -> list[SourceDocument]:
    docs = []
    for n, conv in enumerate(_conversations(data, name, ("conversations.json",), "mapping")):
        where = f"[{n}]"
        if not isinstance(conv, dict) or not isinstance(conv.get("mapping"), dict):
            raise _Bad(
                f'{where}: no "mapping" of messages: not a ChatGPT conversation' + _looks_like(conv)
            )
        conv_id = conv.get("conversation_id") or conv.get("id")
        if conv_id is None:
            raise _Bad(f'{where}: no "id" or "conversation_id"')
        conv_id = str(_need(conv_id, (str, int), f"{where}.id", "must be a string"))
        title = _str_or_none(conv.get("title"), f"{where}.title")
        started = _when(conv.get("create_time"), f"{where}.create_time")
        doc_id = f"chatgpt/{conv_id}"
        items = []
        for node_id, node in _thread(conv["mapping"], conv.get("current_node"), where):
            msg = node.get("message")
            if msg is None:
                continue
            at = f"{where}.mapping.{node_id}.message"
            _need(msg, dict, at, "must be an object")
            author = _need(msg.get("author"), dict, f"{at}.author", "must be an object")
            role = _need(author.get("role"), str, f"{at}.author.role", "must be a string")
            meta = msg.get("metadata") or {}
            if role not in ("user", "assistant") or (
                isinstance(meta, dict) and meta.get("is_visually_hidden_from_conversation")
            ):
                continue
            text = _chatgpt_text(msg.get("content"), at)
            if text is None:
                continue
            items.append(
                RetainItem(
                    text=text,
                    source_id=str(msg.get("id") or node_id),
                    timestamp=_when(msg.get("create_time"), f"{at}.create_time") or started,
                    context="user" if role == "user" else "ChatGPT",
                    document_id=doc_id,
                    metadata={"conversation": title} if title else {},
                    id_given=True,
                )
            )
        if items:
            docs.append(_document(doc_id, items, title or doc_id))
    return docs


# -- Claude -------------------------------------------------------------------------------


def _claude(data: bytes, name: str) -> list[SourceDocument]:
    docs = []
    convs = _conversations(data, name, ("conversations.json",), "chat_messages")
    for n, conv in enumerate(convs):
        where = f"[{n}]"
        if not isinstance(conv, dict) or not isinstance(conv.get("chat_messages"), list):
            raise _Bad(
                f'{where}: no "chat_messages": not a Claude conversation' + _looks_like(conv)
            )
        uuid = _need(conv.get("uuid"), str, f"{where}.uuid", "must be a string")
        title = _str_or_none(conv.get("name"), f"{where}.name") or None
        started = _when(conv.get("created_at"), f"{where}.created_at")
        doc_id = f"claude/{uuid}"
        items = []
        for m, msg in enumerate(conv["chat_messages"]):
            at = f"{where}.chat_messages[{m}]"
            _need(msg, dict, at, "must be an object")
            sender = _need(msg.get("sender"), str, f"{at}.sender", "must be a string")
            content = msg.get("content")
            if isinstance(content, list) and content:
                parts = [
                    c["text"]
                    for c in content
                    if isinstance(c, dict)
                    and c.get("type") == "text"
                    and isinstance(c.get("text"), str)
                ]
                text = "\n\n".join(p for p in parts if p.strip())
            else:
                text = _str_or_none(msg.get("text"), f"{at}.text") or ""
            if not text.strip():
                continue
            items.append(
                RetainItem(
                    text=text.strip(),
                    source_id=str(msg.get("uuid") or f"{uuid}#{m}"),
                    timestamp=_when(msg.get("created_at"), f"{at}.created_at") or started,
                    context={"human": "user", "assistant": "Claude"}.get(sender, sender),
                    document_id=doc_id,
                    metadata={"conversation": title} if title else {},
                    id_given=True,
                )
            )
        if items:
            docs.append(_document(doc_id, items, title or doc_id))
    return docs


# -- mem0 ---------------------------------------------------------------------------------


def _mem0(data: bytes, name: str) -> list[SourceDocument]:
    raw = _unpacked(data, ("memories.json",), name)
    user: str | None = None
    categories: dict[str, str] = {}
    if _json_lines(raw):  # OpenMemory's memories.jsonl(.gz): a memory a line
        records = [(f"line {n}", obj) for n, obj in _lines(raw, name)]
    else:
        obj = _json(raw, name)
        if isinstance(obj, dict) and isinstance(obj.get("results"), list):
            obj = obj["results"]  # the API's and the library's {"results": [...]}
        elif isinstance(obj, dict) and isinstance(obj.get("memories"), list):  # OpenMemory
            owner = obj.get("user")
            if isinstance(owner, dict) and isinstance(owner.get("user_id"), str):
                user = owner["user_id"]
            for c in obj.get("categories") or []:
                if isinstance(c, dict) and isinstance(c.get("id"), str):
                    if isinstance(c.get("name"), str):
                        categories[c["id"]] = c["name"]
            obj = obj["memories"]
        if not isinstance(obj, list):
            raise ImportFormatError(
                f'{name}: expected mem0 memories (a JSON list, {{"results": [...]}} or '
                f'OpenMemory\'s {{"memories": [...]}}), found {type(obj).__name__}'
                + _looks_like(obj)
            )
        records = [(f"[{n}]", m) for n, m in enumerate(obj)]
    by_user: dict[str, list[RetainItem]] = {}
    from memcli.labels import label_problem

    for where, mem in records:
        if not isinstance(mem, dict):
            raise _Bad(f"{where}: not a memory object" + _looks_like(mem))
        text = mem.get("memory", mem.get("content"))
        if not isinstance(text, str):
            raise _Bad(f'{where}: no "memory" text (not a mem0 memory)' + _looks_like(mem))
        if mem.get("state") == "deleted" or not text.strip():
            continue
        owner = _str_or_none(mem.get("user_id"), f"{where}.user_id") if user is None else user
        mem_id = mem.get("id")
        names = mem.get("categories") or [
            categories[c] for c in mem.get("category_ids") or [] if c in categories
        ]
        _need(names, list, f"{where}.categories", "must be a list")
        tags = [c for c in names if isinstance(c, str) and not label_problem(c)]
        metadata = mem.get("metadata") or {}
        _need(metadata, dict, f"{where}.metadata", "must be an object")
        extra = {
            k: mem[k]
            for k in ("id", "created_at", "updated_at", "agent_id", "run_id", "app", "state")
            if isinstance(mem.get(k), str)
        }
        doc_id = f"mem0/{owner}" if owner else "mem0"
        by_user.setdefault(doc_id, []).append(
            RetainItem(
                text=text.strip(),
                source_id=str(mem_id) if mem_id is not None else None,
                # The words as mem0 last wrote them: said when they were last updated.
                timestamp=_when(mem.get("updated_at"), f"{where}.updated_at")
                or _when(mem.get("created_at"), f"{where}.created_at"),
                tags=tags,
                document_id=doc_id,
                metadata={**metadata, "mem0": extra},
                id_given=mem_id is not None,
                lead_in=False,
            )
        )
    return [_document(doc_id, items, doc_id) for doc_id, items in by_user.items()]


# -- the MCP memory server's memory.json --------------------------------------------------


def _mcp_memory(data: bytes, name: str) -> list[SourceDocument]:
    entities: dict[str, tuple[str | None, list[str]]] = {}
    relations: dict[str, list[tuple[str, str, str]]] = {}
    for number, obj in _lines(data, name):
        where = f"line {number}"
        kind = obj.get("type") if isinstance(obj, dict) else None
        if kind == "entity":
            entity = _need(obj.get("name"), str, f"{where}: name", "must be a string")
            etype = _str_or_none(obj.get("entityType"), f"{where}: entityType")
            observations = obj.get("observations") or []
            _need(observations, list, f"{where}: observations", "must be a list of strings")
            for o in observations:
                _need(o, str, f"{where}: observations", "must be a list of strings")
            known = entities.setdefault(entity, (etype, []))
            known[1].extend(observations)
        elif kind == "relation":
            parts = [
                _need(obj.get(k), str, f"{where}: {k}", "must be a string")
                for k in ("from", "to", "relationType")
            ]
            relations.setdefault(parts[0], []).append((parts[0], parts[1], parts[2]))
        else:
            raise _Bad(
                f'{where}: not an "entity" or "relation" line of the MCP memory server\'s '
                "memory.json"
            )
    docs = []
    for entity in [*entities, *(r for r in relations if r not in entities)]:
        etype, observations = entities.get(entity, (None, []))
        doc_id = f"mcp-memory/{entity}"
        # An observation is about its entity, which it does not name ("Speaks fluent
        # Spanish"): the entity is where it comes from, its context, and every fact of it
        # mentions the entity.
        items = [
            RetainItem(
                text=o,
                context=entity,
                document_id=doc_id,
                metadata={"entity_type": etype} if etype else {},
                mentions={entity: None},
                lead_in=False,
            )
            for o in observations
            if o.strip()
        ]
        for a, b, rel in relations.get(entity, []):
            items.append(
                RetainItem(
                    text=f"{a} {rel.replace('_', ' ')} {b}",
                    document_id=doc_id,
                    metadata={"relation": rel},
                    mentions={a: a, b: b},
                    lead_in=False,
                )
            )
        if items:
            docs.append(_document(doc_id, items, doc_id))
    return docs


# -- plain JSONL --------------------------------------------------------------------------

_TEXT_KEYS = ("text", "content", "message", "body")
_SPEAKER_KEYS = ("context", "speaker", "role", "author", "sender", "user", "name")
_TIME_KEYS = ("timestamp", "created_at", "time", "date", "ts")
_CONVERSATION_KEYS = (
    "document_id", "conversation_id", "conversation", "session_id", "session", "thread_id",
    "thread", "chat_id", "channel",
)  # fmt: skip
_ID_KEYS = ("id", "message_id", "uuid")


def _first(obj: dict[str, Any], keys: tuple[str, ...]) -> tuple[str | None, Any]:
    for key in keys:
        if obj.get(key) is not None:
            return key, obj[key]
    return None, None


def _message_text(value: Any, where: str) -> str:
    """A message's text: a string, or a list of parts ({"type": "text", "text": ...})."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n\n".join(
            p if isinstance(p, str) else p.get("text", "")
            for p in value
            if isinstance(p, str) or isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    raise _Bad(f"{where}: the text must be a string or a list of text parts")


def _speaker(value: Any) -> str | None:
    if isinstance(value, dict):  # {"author": {"role": "user", "name": ...}}
        value = value.get("name") or value.get("role")
    return value if isinstance(value, str) and value.strip() else None


def _jsonl_item(obj: dict[str, Any], where: str, conversation: str | None) -> RetainItem | None:
    from memcli.store import FACT_TYPES

    key, raw_text = _first(obj, _TEXT_KEYS)
    if key is None:
        raise _Bad(f'{where}: no text (a "text" or "content" field)')
    text = _message_text(raw_text, f"{where}: {key}")
    if not text.strip():
        return None
    time_key, raw_time = _first(obj, _TIME_KEYS)
    id_key, raw_id = _first(obj, _ID_KEYS)
    if raw_id is not None:
        raw_id = str(_need(raw_id, (str, int), f"{where}: {id_key}", "must be a string"))
    speaker_key, speaker = _first(obj, _SPEAKER_KEYS)
    tags = obj.get("tags") or []
    if isinstance(tags, str):
        tags = [tags]
    _need(tags, list, f"{where}: tags", "must be a list of strings")
    fact_type = obj.get("type")
    if fact_type is not None and fact_type not in FACT_TYPES:
        fact_type = None  # a message's "type" ("message") is no fact type
    metadata = obj.get("metadata") or {}
    _need(metadata, dict, f"{where}: metadata", "must be an object")
    used = {key, time_key, id_key, speaker_key, "tags", "type", "metadata", *_CONVERSATION_KEYS}
    extra = {
        k: v
        for k, v in obj.items()
        if k not in used and (v is None or isinstance(v, (str, int, float, bool)))
    }
    return RetainItem(
        text=text.strip(),
        source_id=raw_id,
        timestamp=_when(raw_time, f"{where}: {time_key}") if time_key else None,
        context=_speaker(speaker),
        tags=[t for t in tags if isinstance(t, str)],
        fact_type=fact_type,
        document_id=conversation,
        metadata={**metadata, **extra},
        id_given=raw_id is not None,
    )


def _jsonl(data: bytes, name: str) -> list[SourceDocument]:
    conversations: dict[str | None, list[RetainItem]] = {}
    for number, obj in _lines(data, name):
        where = f"line {number}"
        if not isinstance(obj, dict):
            raise _Bad(f"{where}: not a JSON object")
        if isinstance(obj.get("messages"), list):  # a whole conversation on one line
            conv = obj.get("id", obj.get("conversation_id"))
            if conv is None:
                raise _Bad(f'{where}: a conversation ("messages") needs an "id"')
            conv = str(_need(conv, (str, int), f"{where}: id", "must be a string"))
            _, started = _first(obj, _TIME_KEYS)
            for m, msg in enumerate(obj["messages"]):
                at = f"{where}: messages[{m}]"
                _need(msg, dict, at, "must be an object")
                item = _jsonl_item(msg, at, conv)
                if item is not None:
                    if item.timestamp is None and started is not None:
                        item.timestamp = _when(started, f"{where}: timestamp")
                    conversations.setdefault(conv, []).append(item)
            continue
        conv_key, conv = _first(obj, _CONVERSATION_KEYS)
        if conv is not None:
            conv = str(_need(conv, (str, int), f"{where}: {conv_key}", "must be a string"))
        item = _jsonl_item(obj, where, conv)
        if item is not None:
            conversations.setdefault(conv, []).append(item)
    docs = []
    for conv, items in conversations.items():
        if conv is None:
            docs.append(SourceDocument(None, None, items, label="items of no conversation"))
        else:
            docs.append(_document(conv, items, conv))
    return docs
