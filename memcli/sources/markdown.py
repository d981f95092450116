"""A note (Markdown or plain text) as the pieces retain stores: read with a real Markdown
parser (markdown-it-py, CommonMark plus tables) and a YAML parser for the front matter.

What a note becomes:
- YAML front matter: `tags` -> tags, `date` (else `created`) -> when it was said, `title`
  -> its title, `aliases` -> metadata. Nothing of it is text to remember.
- The title (front matter `title`, else a first heading of level 1, else the file's name)
  is the context of every fact, as a speaker is a turn's: it is shown with the memory and
  embedded with it.
- Headings are the section a fact belongs to: metadata "section", the headings above it
  outermost first, joined by " > ". Never glued into a fact's text (a heading "Lisbon"
  before "Maya flies..." made the entity "Lisbon Maya"); retain embeds it with the fact
  and indexes it as the fact's lead-in.
- Each paragraph is its own input (split at sentences when long); a list, a code block or
  a table is kept whole, lines and all, as one fact (a long one is cut at line or item
  boundaries; a table's pieces each repeat its header).
- Wiki links `[[Note]]` and `[[Note|shown words]]` read as their words and are mentions of
  the entity Note; embeds `![[file]]`, images and HTML are no text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any

from memcli.display import has_visible_text, one_line
from memcli.errors import MemError
from memcli.labels import label_problem
from memcli.split import word_count

MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".mkd")


class NoteError(MemError, ValueError):
    """A note that cannot be read (one-line message, without the file's name)."""


@dataclass
class Block:
    """One piece of a note to retain: a paragraph, or a list, code block or table kept
    whole (verbatim)."""

    text: str
    section: str | None = None
    verbatim: bool = False
    # entity name -> the words that stand for it in the text (wiki links)
    mentions: dict[str, str | None] = field(default_factory=dict)


@dataclass
class Note:
    title: str | None
    tags: list[str] = field(default_factory=list)
    # When the note says it was written (front matter date / created); None: not said.
    said_at: datetime | None = None
    aliases: list[str] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)


def is_markdown(name: str) -> bool:
    return name.lower().endswith(MARKDOWN_SUFFIXES)


def parse_note(
    text: str, name: str, title: str | None, max_words: int = 60, block_max_words: int = 350
) -> Note:
    """A note from its text: Markdown when `name` says so (.md, .markdown), else plain text
    (one piece). `title` is the fallback title (the file's name without its suffix)."""
    if is_markdown(name):
        return parse_markdown(text, title, max_words, block_max_words)
    note = Note(title=title)
    if has_visible_text(text):
        note.blocks.append(Block(text=text.strip()))
    return note


# -- the parser -----------------------------------------------------------------------------


def _wikilink_rule(state: Any, silent: bool) -> bool:
    """`[[target]]`, `[[target|words]]` and embeds `![[target]]` as one token each."""
    src, pos = state.src, state.pos
    embed = src.startswith("![[", pos)
    if not embed and not src.startswith("[[", pos):
        return False
    start = pos + (3 if embed else 2)
    end = src.find("]]", start)
    if end < 0:
        return False
    inner = src[start:end]
    if not inner.strip() or "\n" in inner or "[" in inner:
        return False
    if not silent:
        target, _, words = inner.partition("|")
        token = state.push("wikilink", "", 0)
        token.content = inner
        token.meta = {"target": target.strip(), "words": words.strip() or None, "embed": embed}
    state.pos = end + 2
    return True


_PARSER: Any = None


def _parser() -> Any:
    global _PARSER
    if _PARSER is None:
        from markdown_it import MarkdownIt
        from mdit_py_plugins.front_matter import front_matter_plugin

        md = MarkdownIt("commonmark").enable(["table", "strikethrough"]).use(front_matter_plugin)
        md.inline.ruler.before("link", "wikilink", _wikilink_rule)
        _PARSER = md
    return _PARSER


def _note_name(target: str) -> str | None:
    """The note a wiki link names: its last path part, without a heading or block anchor
    or a .md suffix; None for a link to another kind of file (an attachment)."""
    name = target.split("#", 1)[0].split("^", 1)[0].strip().rsplit("/", 1)[-1].strip()
    if is_markdown(name):
        name = name.rsplit(".", 1)[0]
    elif "." in name and name.rsplit(".", 1)[1].isalnum() and len(name.rsplit(".", 1)[1]) <= 5:
        return None  # photo.png, paper.pdf
    return name if has_visible_text(name) else None


def _inline(token: Any, mentions: dict[str, str | None], breaks: str = "\n") -> str:
    """An inline token's plain text: emphasis and link syntax dropped (the words kept),
    code spans kept in backticks, wiki links as their words (recorded in `mentions`)."""
    out: list[str] = []
    skip_depth = 0  # inside an image: its alt text is no text of the note
    for child in token.children or []:
        kind = child.type
        if kind == "image":
            continue
        if kind == "html_inline":
            continue
        if skip_depth:
            continue
        if kind == "text":
            out.append(child.content)
        elif kind == "code_inline":
            out.append(f"`{child.content}`")
        elif kind in ("softbreak", "hardbreak"):
            out.append(breaks)
        elif kind == "wikilink":
            meta = child.meta
            if meta["embed"]:
                continue
            entity = _note_name(meta["target"])
            words = meta["words"] or entity or meta["target"]
            out.append(words)
            if entity is not None:
                mentions[entity] = words
    return "".join(out)


def _matching_close(tokens: list[Any], i: int) -> int:
    """The index of the token closing tokens[i] (same nesting level)."""
    close = tokens[i].type.replace("_open", "_close")
    level = tokens[i].level
    j = i + 1
    while j < len(tokens) and not (tokens[j].type == close and tokens[j].level == level):
        j += 1
    return j


def _list_items(tokens: list[Any], i: int, mentions: dict[str, str | None]) -> list[list[str]]:
    """The items of the list opening at tokens[i], each as its rendered lines."""
    end = _matching_close(tokens, i)
    ordered = tokens[i].type == "ordered_list_open"
    number = int(tokens[i].attrGet("start") or 1) if ordered else 0
    items: list[list[str]] = []
    j = i + 1
    while j < end:
        if tokens[j].type != "list_item_open":
            j += 1
            continue
        item_end = _matching_close(tokens, j)
        marker = f"{number}. " if ordered else "- "
        number += 1
        lines: list[str] = []
        k = j + 1
        while k < item_end:
            t = tokens[k]
            if t.type == "inline":
                text = _inline(t, mentions, breaks=" ").strip()
                if text:
                    lines.append(text)
            elif t.type in ("bullet_list_open", "ordered_list_open"):
                for sub in _list_items(tokens, k, mentions):
                    lines.extend(sub)  # indented below as the item's continuation
                k = _matching_close(tokens, k)
            elif t.type in ("fence", "code_block"):
                lines.extend(t.content.rstrip("\n").split("\n"))
            k += 1
        if lines:
            items.append([marker + lines[0], *("  " + line for line in lines[1:])])
        j = item_end + 1
    return items


def _pieces(units: list[list[str]], max_words: int, head: list[str] | None = None) -> list[str]:
    """Units of lines (list items, table rows, code lines) grouped into pieces of at most
    max_words words (a unit is never cut); each piece starts with `head` (a table's header)
    and keeps its lines."""
    head = head or []
    budget = max(max_words - word_count(" ".join(head)), 1)
    pieces: list[list[str]] = []
    words = 0
    for unit in units:
        n = word_count(" ".join(unit))
        if not pieces or (words + n > budget and words > 0):
            pieces.append([])
            words = 0
        pieces[-1].extend(unit)
        words += n
    return ["\n".join(head + piece) for piece in pieces if piece]


def _front_matter(content: str) -> dict[str, Any]:
    import yaml

    # libyaml's loader when PyYAML has it: the pure-Python one took 2 ms a front matter.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(content, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not YAML"
        raise NoteError(f"front matter is not valid YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise NoteError("front matter is not a YAML mapping of keys to values")
    return data


def _strings(value: Any, key: str, split_commas: bool = False) -> list[str]:
    """A front-matter list of strings (or one string; for tags, "a, b" or "a b")."""
    if value is None:
        return []
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        value = str(value)
        if split_commas:
            value = [v for v in value.replace(",", " ").split() if v]
        else:
            value = [value]
    if not isinstance(value, list) or not all(
        isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value
    ):
        raise NoteError(f'front matter "{key}" must be a list of words')
    out = []
    for v in value:
        v = str(v).strip()
        if key == "tags":
            v = v.lstrip("#")
        if not v:
            continue
        problem = label_problem(v)
        if problem:
            raise NoteError(f'front matter "{key}": {v!r} {problem}')
        out.append(v)
    return out


def _said_at(data: dict[str, Any]) -> datetime | None:
    """When the front matter says the note was written: `date`, else `created`."""
    from memcli.timeparse import parse_when

    for key in ("date", "created"):
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, datetime):
            text = value.isoformat()
        elif isinstance(value, date):
            text = datetime.combine(value, time()).date().isoformat()
        elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
            text = str(value)
        else:
            raise NoteError(f'front matter "{key}" is not a date')
        try:
            return parse_when(text)
        except ValueError as exc:
            raise NoteError(f'front matter "{key}": {exc}') from None
    return None


def parse_markdown(
    text: str, title: str | None, max_words: int = 60, block_max_words: int = 350
) -> Note:
    # As markdown-it normalises its input, so its line numbers (token.map) index these lines.
    source = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd")
    lines = source.split("\n")
    tokens = _parser().parse(source)
    note = Note(title=title)
    front: dict[str, Any] = {}
    if tokens and tokens[0].type == "front_matter":
        front = _front_matter(tokens[0].content)
        tokens = tokens[1:]
    if front:
        given = front.get("title")
        if isinstance(given, (str, int, float)) and has_visible_text(str(given)):
            note.title = one_line(str(given))
        note.tags = _strings(front.get("tags", front.get("tag")), "tags", split_commas=True)
        note.aliases = _strings(front.get("aliases", front.get("alias")), "aliases")
        note.said_at = _said_at(front)
    title_heading = front.get("title") is None and bool(tokens) and tokens[0].type == "heading_open"
    title_heading = title_heading and tokens[0].tag == "h1"
    headings: list[tuple[int, str]] = []  # (level, text) above the current position

    def section() -> str | None:
        return " > ".join(h for _, h in headings) or None

    i = 0
    while i < len(tokens):
        t = tokens[i]
        kind = t.type
        if kind == "heading_open":
            level = int(t.tag[1:])
            words = one_line(_inline(tokens[i + 1], {}, breaks=" ")).strip()
            if i == 0 and title_heading:
                note.title = words or note.title
            else:
                headings[:] = [(lv, h) for lv, h in headings if lv < level]
                if words:
                    headings.append((level, words))
            i = _matching_close(tokens, i) + 1
            continue
        if kind == "paragraph_open":
            mentions: dict[str, str | None] = {}
            words = _inline(tokens[i + 1], mentions).strip()
            if has_visible_text(words):
                note.blocks.append(Block(words, section(), False, mentions))
            i = _matching_close(tokens, i) + 1
            continue
        if kind in ("bullet_list_open", "ordered_list_open"):
            mentions = {}
            items = _list_items(tokens, i, mentions)
            for piece in _pieces(items, max_words):
                used = {e: w for e, w in mentions.items() if w is None or w in piece}
                note.blocks.append(Block(piece, section(), True, used))
            i = _matching_close(tokens, i) + 1
            continue
        if kind in ("fence", "code_block"):
            start, end = t.map
            block = lines[start:end]
            if kind == "fence" and len(block) >= 2 and block[-1].strip().startswith(t.markup):
                opening, body, closing = [block[0]], block[1:-1], [block[-1]]
            elif kind == "fence":
                opening, body, closing = [block[0]], block[1:], []
            else:
                opening, body, closing = [], block, []
            if has_visible_text("\n".join(body)):
                for piece in _pieces([[line] for line in body], block_max_words, opening):
                    note.blocks.append(Block("\n".join([piece, *closing]), section(), True))
            i += 1
            continue
        if kind == "table_open":
            start, end = t.map
            rows = [line for line in lines[start:end] if line.strip()]
            head, body = rows[:2], [[row] for row in rows[2:]]
            for piece in _pieces(body or [[]], block_max_words, head):
                note.blocks.append(Block(piece, section(), True))
            i = _matching_close(tokens, i) + 1
            continue
        # blockquotes (their paragraphs and lists are read as any), rules, HTML: no text
        i += 1
    return note
