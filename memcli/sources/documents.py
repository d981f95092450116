"""Documents with a known source: each is retained whole, and retaining the same source
again is skipped (its hash is recorded on the document, store/sources.py), a changed one
replaces its document atomically (the staging swap of retain.py).

Used by `mem sync` (a file per document), `mem retain --file` and `mem import --from` (a
conversation per document). Documents are retained in groups of about GROUP_ITEMS items,
one retain call each: every group goes live whole at its end, so an interrupted or killed
run keeps the groups before it, with their hashes, and a run again does only the rest.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memcli.retain import Retainer, RetainItem, RetainSummary
from memcli.sources.markdown import Note, NoteError, parse_note
from memcli.store import Store

# What a source becomes (the parsers, the fields of an item) has this version: when it
# changes, every source hashes anew, so the next sync or import retains it again.
SOURCE_FORMAT = "mem-source-1"

# Items per retain call of a run: one transaction publishes each group's documents.
GROUP_ITEMS = 256


@dataclass
class SourceDocument:
    """A document to retain from one source: its id, the hash of that source, its items
    (all carrying document_id), and how messages name it (a path, a conversation title).
    document_id None: items of no document (retained as they are, deduplicated by id and
    time as any)."""

    document_id: str | None
    source_hash: str | None
    items: list[RetainItem]
    label: str = ""


def file_hash(data: bytes, options: dict[str, Any] | None = None) -> str:
    """The hash of a file's bytes as a source, with the options that change what it
    becomes (retain's --at, --context, --tag)."""
    h = hashlib.sha256(SOURCE_FORMAT.encode())
    h.update(json.dumps(options or {}, sort_keys=True, default=str).encode())
    h.update(b"\x00")
    h.update(data)
    return h.hexdigest()


def items_hash(items: Iterable[RetainItem]) -> str:
    """The hash of a document's items (an imported conversation): the same messages at
    the same times are the same source."""
    h = hashlib.sha256(SOURCE_FORMAT.encode())
    for item in items:
        h.update(
            json.dumps(
                [
                    item.text,
                    item.source_id,
                    item.timestamp.isoformat() if item.timestamp else None,
                    item.context,
                    item.tags,
                    item.fact_type,
                    item.metadata,
                    item.verbatim,
                    item.mentions,
                    item.lead_in,
                ],
                sort_keys=True,
                default=str,
                ensure_ascii=False,
            ).encode("utf-8", "surrogatepass")
        )
        h.update(b"\x00")
    return h.hexdigest()


def note_items(
    note: Note,
    *,
    document_id: str | None,
    source_id: str | None,
    said_at: datetime | None,
    context: str | None = None,
    tags: Sequence[str] = (),
    fact_type: str | None = None,
) -> list[RetainItem]:
    """The items of a note: one per paragraph, list, code block or table, all of one
    document. The note's own date wins over `said_at` (a file's time, or --at); `context`
    (--context) over its title; `tags` add to its tags."""
    all_tags = list(dict.fromkeys([*note.tags, *tags]))
    items = []
    for block in note.blocks:
        metadata: dict[str, Any] = {}
        if block.section:
            metadata["section"] = block.section
        if note.aliases:
            metadata["aliases"] = list(note.aliases)
        items.append(
            RetainItem(
                text=block.text,
                source_id=source_id,
                timestamp=note.said_at or said_at,
                context=context or note.title,
                tags=list(all_tags),
                fact_type=fact_type,
                document_id=document_id,
                metadata=metadata,
                verbatim=block.verbatim,
                mentions=dict(block.mentions),
                lead_in=False,
            )
        )
    return items


@dataclass
class DocumentsReport:
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    # what the retain calls did, summed (facts, duplicates, entities, links, items)
    retained: RetainSummary = field(default_factory=RetainSummary)
    interrupted: bool = False
    seconds: float = 0.0


def split_by_change(
    store: Store, bank: str, docs: Sequence[SourceDocument], sync_root: str | None = None
) -> tuple[list[SourceDocument], list[SourceDocument], list[SourceDocument]]:
    """(new, changed, unchanged): a document is unchanged when the bank holds it from the
    same source hash (and, for a sync, from the same root)."""
    bank_id = store.banks.bank_id(bank)
    ids = [d.document_id for d in docs if d.document_id is not None]
    known = store.sources.document_sources(bank_id, ids) if bank_id is not None and ids else {}
    new, changed, same = [], [], []
    for doc in docs:
        live = known.get(doc.document_id) if doc.document_id is not None else None
        if live is None:
            new.append(doc)
        elif live.source_hash == doc.source_hash and live.sync_root == sync_root:
            same.append(doc)
        else:
            changed.append(doc)
    return new, changed, same


def retain_documents(
    store: Store,
    bank: str,
    docs: Sequence[SourceDocument],
    embedder: Callable[[], Any],
    *,
    sync_root: str | None = None,
    now: datetime | None = None,
    progress: Callable[[int], None] | None = None,
    skip_unchanged: bool = True,
    group_items: int = GROUP_ITEMS,
) -> DocumentsReport:
    """Retain the documents whose source changed (all of them with skip_unchanged off), in
    groups (see the module docstring). `embedder()` is called once, only when something is
    to be retained. Raises RetainError (nothing written) for a bad item of any document."""
    started = time.perf_counter()
    report = DocumentsReport()
    if skip_unchanged:
        new, changed, same = split_by_change(store, bank, docs, sync_root)
    else:
        new, changed, same = list(docs), [], []
    report.unchanged = [d.label or str(d.document_id) for d in same]
    wanted = {id(d) for d in (*new, *changed)}
    todo = [d for d in docs if id(d) in wanted]
    if not todo:
        report.seconds = time.perf_counter() - started
        return report
    from memcli.retain import RetainError, check_item

    # Every item checked before the first write, as one retain call does: a bad item of
    # the last document must not leave the first groups written.
    for doc in todo:
        for item in doc.items:
            try:
                check_item(item)
            except RetainError as exc:
                where = doc.label or item.source_id or doc.document_id
                raise RetainError(f"{where}: {exc}" if where else str(exc)) from None
    model = embedder()
    added = {id(d) for d in new}
    run_now = now
    for group in _groups(todo, group_items):
        sources = {
            d.document_id: (d.source_hash, sync_root) for d in group if d.document_id is not None
        }
        retainer = Retainer(store, bank, model, now=run_now, document_sources=sources)
        run_now = retainer.now  # one time for the whole run: undated items alike
        summary = retainer.retain([item for d in group for item in d.items], progress)
        _add(report.retained, summary)
        if summary.interrupted:
            report.interrupted = True
            break
        for d in group:
            (report.added if id(d) in added else report.replaced).append(
                d.label or str(d.document_id)
            )
    report.seconds = time.perf_counter() - started
    return report


def _groups(docs: list[SourceDocument], size: int) -> Iterable[list[SourceDocument]]:
    group: list[SourceDocument] = []
    items = 0
    for doc in docs:
        group.append(doc)
        items += len(doc.items)
        if items >= size:
            yield group
            group, items = [], 0
    if group:
        yield group


def _add(total: RetainSummary, part: RetainSummary) -> None:
    for key in (
        "items",
        "facts",
        "duplicates",
        "documents_replaced",
        "speakers_from_text",
        "entities",
        "links",
    ):
        setattr(total, key, getattr(total, key) + getattr(part, key))
    total.batches += part.batches
    total.seconds += part.seconds


def file_document(
    path: str, data: bytes, text: str, defaults: dict[str, Any], document_id: str | None
) -> SourceDocument:
    """A file given to `mem retain --file` as a document: a Markdown file read as a note
    (front matter, sections, whole blocks), any other as one text; its name without the
    suffix is the context unless --context says otherwise. `defaults` are the command's
    options (timestamp, context, tags, fact_type). Raises NoteError or RetainError with the
    path in the message."""
    from pathlib import PurePath

    from memcli.retain import RetainError, check_item

    name = PurePath(path).name
    try:
        note = parse_note(text, name, PurePath(path).stem or None)
    except NoteError as exc:
        raise NoteError(f"{path}: {exc}") from None
    items = note_items(
        note,
        document_id=document_id,
        source_id=path,
        said_at=defaults.get("timestamp"),
        context=defaults.get("context"),
        tags=defaults.get("tags") or (),
        fact_type=defaults.get("fact_type"),
    )
    if not items:
        raise NoteError(f"{path} is empty: nothing to retain")
    for item in items:
        try:
            check_item(item)
        except RetainError as exc:
            raise RetainError(f"{path}: {exc}") from None
    options = {
        "name": name,
        "at": defaults.get("timestamp"),
        "context": defaults.get("context"),
        "tags": list(defaults.get("tags") or []),
        "type": defaults.get("fact_type"),
    }
    return SourceDocument(document_id, file_hash(data, options), items, label=path)


def merged_by_document(docs: Sequence[SourceDocument], other_ids: set[str]) -> list[SourceDocument]:
    """Documents of one retain call, one per document id: the files given one --document
    are one document, whose source is all of them (no source at all when the call brings
    it other items too, `other_ids`: typed text with --document)."""
    out: dict[str | None, SourceDocument] = {}
    loose: list[SourceDocument] = []
    for doc in docs:
        if doc.document_id is None:
            loose.append(doc)
            continue
        have = out.get(doc.document_id)
        if have is None:
            out[doc.document_id] = SourceDocument(
                doc.document_id, doc.source_hash, list(doc.items), doc.label
            )
            continue
        joined = hashlib.sha256(f"{have.source_hash}\x00{doc.source_hash}".encode()).hexdigest()
        have.source_hash = joined
        have.items.extend(doc.items)
        have.label = f"{have.label}, {doc.label}"
    for doc_id, doc in out.items():
        if doc_id in other_ids:
            doc.source_hash = None
    return [*out.values(), *loose]


def leave_out_unchanged(
    store: Store, bank: str, items: list[RetainItem], file_docs: Sequence[SourceDocument]
) -> tuple[list[RetainItem], dict[str, tuple[str | None, str | None]], list[str]]:
    """For `mem retain --file`: (the call's items without those of documents retained
    before from the same files, the source of each file document to record with it, the
    files left out)."""
    from_files = {id(item) for doc in file_docs for item in doc.items}
    others = {i.document_id for i in items if id(i) not in from_files and i.document_id}
    docs = [d for d in merged_by_document(file_docs, others) if d.document_id is not None]
    _, _, same = split_by_change(store, bank, [d for d in docs if d.source_hash])
    unchanged = {d.document_id for d in same}
    sources = {d.document_id: (d.source_hash, None) for d in docs if d.document_id}
    kept = [i for i in items if i.document_id not in unchanged]
    return kept, sources, [d.label for d in same]
