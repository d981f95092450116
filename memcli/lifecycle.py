"""The memory lifecycle: select, show, forget, correct and re-embed what a bank holds.

The CLI (memcli/commands/lifecycle.py) parses and prints; everything here works on a Store
and raises LifecycleError (or StoreError) with a one-line message before anything is
written.

What the commands promise:
- forget removes the selected facts from every table (facts, FTS, vectors, tags, entity
  rows and counts, links, chunks and documents no fact uses any more) in one transaction;
  a correction whose new fact is forgotten gives the old fact its validity back.
- correct stores the new text as a new fact and closes the old one at the new one's time
  (valid time, as graphiti's valid_at / invalid_at): the old fact stays, skipped by recall
  and list, and `--as-of` a time before the correction still finds it. One transaction.
- reembed computes every vector of a bank again with another model from the stored facts
  (no re-extraction), in batches that each commit into a staging table; the bank keeps its
  old vectors, and stays searchable with its old model, until the last batch swaps the new
  ones in with the new fingerprint in one transaction. An interrupted run resumes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memcli.display import has_visible_text
from memcli.errors import MemError
from memcli.store import Fact, InterruptedAfterCommit, iso
from memcli.store.protocol import StoreProtocol

# Facts embedded (and committed) per re-embedding batch: small enough that Ctrl-C loses
# little work, large enough that the per-transaction cost does not matter.
REEMBED_BATCH = 256


class LifecycleError(MemError, ValueError):
    """Bad input to a lifecycle command (one-line message); nothing was written."""


class OptionError(LifecycleError):
    """A bad option value (a usage error: exit 2)."""

    def __init__(self, message: str, *, field: str | None = None, usage: bool = True) -> None:
        super().__init__(message, field=field, usage=usage)


@dataclass
class Selection:
    """Which facts of a bank a command works on. Every given criterion must hold."""

    ids: list[int] | None = None
    document: str | None = None
    source_id: str | None = None
    context: str | None = None
    since: datetime | None = None  # mentioned at or after
    until: datetime | None = None  # mentioned before
    types: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    tags_match: str = "any"
    valid_only: bool = True
    as_of: datetime | None = None
    # forget --query: the facts recall ranks best for it (at most query_limit).
    query: str | None = None
    query_limit: int = 10

    def narrows(self) -> bool:
        """True when something beyond validity narrows the selection (forget requires it)."""
        return bool(
            self.ids
            or self.document is not None
            or self.source_id is not None
            or self.context is not None
            or self.since is not None
            or self.until is not None
            or self.types
            or self.tags
            or self.query is not None
        )


def check_selection(sel: Selection) -> None:
    from memcli.labels import label_problem
    from memcli.recall.types import TAG_MODES
    from memcli.store import FACT_TYPES

    for t in sel.types or ():
        if t not in FACT_TYPES:
            raise OptionError(f"unknown type {t!r} (use {', '.join(FACT_TYPES)})", field="types")
    for tag in sel.tags or ():
        problem = label_problem(tag)
        if problem:  # as retain refuses it: no fact can carry such a tag
            raise OptionError(f"{tag!r} {problem}", field="tags")
    if sel.tags_match not in TAG_MODES:
        raise OptionError(
            f"unknown value {sel.tags_match!r} (use {', '.join(TAG_MODES)})", field="tags_match"
        )
    if sel.since and sel.until and sel.since >= sel.until:
        # (Flag-neutral: list says --until, forget --before.)
        raise OptionError(
            f"the time range is empty: its start ({{since}}) {iso(sel.since)} is not before "
            f"its end ({{until}}) {iso(sel.until)}"
        )
    if sel.query is not None and not has_visible_text(sel.query):
        raise OptionError("is empty", field="query")
    if sel.query_limit <= 0:
        raise OptionError("must be positive", field="limit")


def check_as_of(store: StoreProtocol, bank_id: int, as_of: datetime | None) -> None:
    """An --as-of before the bank existed has no answer: say so instead of printing none."""
    if as_of is None:
        return
    created = store.banks.bank_created_at(bank_id)
    if created is not None and as_of < created:
        name = store.banks.bank_row(bank_id)["name"]
        raise LifecycleError(
            f"{iso(as_of)} is before bank {name!r} existed (created {iso(created)})",
            field="as_of",
        )


def iter_facts(
    store: StoreProtocol, bank: str, sel: Selection, limit: int | None = None, offset: int = 0
) -> Iterator[Fact]:
    """The selected facts, newest said first, streamed (a page of rows at a time)."""
    check_selection(sel)
    bank_id = store.banks.require_bank(bank)
    check_as_of(store, bank_id, sel.as_of)
    if limit is not None and limit <= 0:
        raise OptionError("must be positive", field="limit")
    if offset < 0:
        raise OptionError("cannot be negative", field="offset")
    facts = store.facts.iter_facts(bank_id, sel, limit=limit, offset=offset)
    return facts if sel.as_of is None else _as_they_stood(facts, sel.as_of)


def _as_they_stood(facts: Iterator[Fact], as_of: datetime) -> Iterator[Fact]:
    """Facts as they stood at as_of: a correction made after it is not known yet (a fact
    corrected later was shown "corrected by 5" in the store as it stood before fact 5)."""
    for fact in facts:
        if fact.invalid_at is not None and fact.invalid_at > as_of:
            fact = dataclasses.replace(fact, invalid_at=None, superseded_by=None)
        yield fact


# -- show ---------------------------------------------------------------------------------


def show(store: StoreProtocol, bank: str, fact_ids: Sequence[int]) -> list[dict[str, Any]]:
    """Each fact whole: columns, document and chunk, entities, links, history, embedder."""
    bank_id = store.banks.require_bank(bank)
    if not fact_ids:
        raise LifecycleError("give at least one fact id")
    missing = store.facts.missing_fact_ids(bank_id, list(fact_ids))
    if missing:
        raise LifecycleError(f"no fact {_id_list(missing)} in bank {bank!r}")
    facts = store.facts.facts_by_id(list(fact_ids), bank_id)
    embedder, fingerprint = store.vectors.bank_embedder(bank_id)
    out = []
    for fid in fact_ids:
        f = facts[fid]
        chunk = store.documents.chunk_texts([f.chunk_id]).get(f.chunk_id) if f.chunk_id else None
        out.append(
            {
                **fact_json(f),
                "chunk": chunk,
                "entities": [
                    {"id": eid, "name": name, "aliases": aliases}
                    for eid, name, aliases in store.entities.fact_entity_rows(fid)
                ],
                "links": [
                    {"direction": d, "kind": k, "weight": w, "other": o, "other_text": t}
                    for d, k, w, o, t in store.links.fact_links(fid)
                ],
                "history": history(store, fid),
                "embedder": embedder,
                "embedder_fingerprint": fingerprint,
                "has_vector": store.vectors.has_vector(fid),
            }
        )
    return out


def _earlier_versions(store: StoreProtocol, fact_id: int) -> list[int]:
    """The facts a fact corrected, back to the chain's first version, oldest first."""
    chain: list[int] = []
    seen = {fact_id}
    current = fact_id
    while True:  # the fact this one corrected, and so on
        earlier = [i for i in store.facts.facts_superseded_by(current) if i not in seen]
        if not earlier:
            return chain
        current = earlier[0]
        chain.insert(0, current)
        seen.add(current)


def history(store: StoreProtocol, fact_id: int) -> list[dict[str, Any]]:
    """The whole correction chain through a fact, oldest first: what it superseded (back
    to the first version) and what superseded it (to the current one)."""
    chain = [*_earlier_versions(store, fact_id), fact_id]
    seen = set(chain)
    current = fact_id
    while True:  # forward: what corrected this one
        f = store.facts.facts_by_id([current]).get(current)
        nxt = f.superseded_by if f else None
        if nxt is None or nxt in seen:
            break
        chain.append(nxt)
        seen.add(nxt)
        current = nxt
    if len(chain) == 1:
        return []
    facts = store.facts.facts_by_id(chain)
    return [
        {
            "id": i,
            "text": facts[i].text,
            "valid_from": iso(facts[i].valid_from),
            "invalid_at": iso(facts[i].invalid_at),
            "superseded_by": facts[i].superseded_by,
        }
        for i in chain
        if i in facts
    ]


def fact_json(f: Fact) -> dict[str, Any]:
    return {
        "id": f.id,
        "text": f.text,
        "context": f.context,
        "type": f.fact_type,
        "mentioned_at": iso(f.mentioned_at),
        "occurred_start": iso(f.occurred_start),
        "occurred_end": iso(f.occurred_end),
        "valid_from": iso(f.valid_from),
        "invalid_at": iso(f.invalid_at),
        "superseded_by": f.superseded_by,
        "created_at": iso(f.created_at),
        "tags": f.tags,
        "metadata": f.metadata,
        "source_id": f.source_id,
        "document_id": f.document_id,
        "chunk_id": f.chunk_id,
        "entities": f.entities,
    }


# -- forget -------------------------------------------------------------------------------


@dataclass
class ForgetPlan:
    bank_id: int
    fact_ids: list[int]
    reopens: int = 0
    preview: list[Fact] = field(default_factory=list)


def plan_forget(
    store: StoreProtocol,
    bank: str,
    sel: Selection,
    *,
    embedder: Any = None,
    preview: int = 20,
) -> ForgetPlan:
    """Which facts a forget would remove (nothing is written). Refuses an empty selector
    and ids the bank does not hold."""
    check_selection(sel)
    if sel.tags and sel.tags_match in ("any", "all"):
        # recall's non-strict modes let untagged facts through: here they would go too.
        raise OptionError(
            f"{sel.tags_match} would also forget every untagged fact: use "
            f"{sel.tags_match}_strict (any_strict is the default)",
            field="tags_match",
        )
    if not sel.narrows():
        raise OptionError(
            "say what to forget: fact {ids}, {source_id}, {document_id}, {tags}, {types}, "
            "{context}, {until}/{since} or {query}"
        )
    bank_id = store.banks.require_bank(bank)
    if sel.ids:
        missing = store.facts.missing_fact_ids(bank_id, sel.ids)
        if missing:
            raise LifecycleError(f"no fact {_id_list(missing)} in bank {bank!r}; nothing forgotten")
    if sel.document is not None and store.documents.document_row(bank_id, sel.document) is None:
        raise LifecycleError(f"no document {sel.document!r} in bank {bank!r}; nothing forgotten")
    ids = store.facts.selected_fact_ids(bank_id, sel)
    if sel.query is not None:
        ranked = _query_ids(store, bank, sel, embedder)
        chosen = set(ids)
        ids = sorted(i for i in ranked if i in chosen)
    plan = ForgetPlan(bank_id, ids, store.facts.superseded_among(ids) if ids else 0)
    plan.preview = list(store.facts.facts_by_id(ids[:preview], bank_id).values())
    return plan


def _query_ids(store: StoreProtocol, bank: str, sel: Selection, embedder: Any) -> list[int]:
    """The facts recall ranks best for --query (the same pipeline as `mem recall`) that
    match it."""
    from memcli import fts
    from memcli.recall import RecallOptions
    from memcli.recall import recall as run_recall
    from memcli.retain import semantic_link_floor

    options = RecallOptions(
        limit=sel.query_limit,
        max_tokens=1_000_000,
        types=list(sel.types) if sel.types else None,
        tags=list(sel.tags) if sel.tags else None,
        tags_match=sel.tags_match,
        rerank=False,
        as_of=sel.as_of,
    )
    # The model itself (a lazy one loaded now, where there are vectors to search): its link
    # floor is the bar below.
    model = embedder
    if callable(embedder) and not hasattr(embedder, "embed") and store.vectors.has_vectors():
        model = embedder()
    result = run_recall(store, bank, sel.query, options, embedder=model)
    # Only facts that match the query: recall ranks the nearest facts of any query, and for
    # one that matches nothing ("zxqv") those are unrelated memories, which a forget (an
    # agent's through MCP asks no one) would remove. A fact matches when it holds a word of
    # the query in its own words (text, speaker, entities: not the lead-in, what was said
    # before it) or is as close to it as retain's semantic links
    # require of two facts.
    floor = semantic_link_floor(model)
    worded = store.search.own_words_match(
        [c.fact_id for c in result.results], fts.query_terms(sel.query)
    )
    return [
        c.fact_id
        for c in result.results
        if c.fact_id in worded or c.arm_scores.get("semantic", 0.0) >= floor
    ]


# What a forget reports it removed (forget's counts), in this order.
FORGET_COUNTS = ("facts", "links", "entities", "chunks", "documents", "reopened")


def forget_report(plan: ForgetPlan, dry_run: bool, counts: dict[str, int] | None) -> dict:
    """A forget's JSON (CLI and MCP): the plan for a dry run, else what was forgotten and
    the counts, zeros when nothing matched (one shape whether or not anything did)."""
    if dry_run:
        return {
            "dry_run": True,
            "would_forget": plan.fact_ids,
            "would_reopen": plan.reopens,
            "facts": [fact_json(f) for f in plan.preview],
        }
    return {"forgotten": plan.fact_ids, "counts": counts or dict.fromkeys(FORGET_COUNTS, 0)}


def forget(store: StoreProtocol, plan: ForgetPlan) -> dict[str, int]:
    """Remove the planned facts everywhere, in one transaction; returns counts (the keys of
    FORGET_COUNTS)."""
    with store.atomic():
        # Facts picked at plan time that are gone now (another process) are simply skipped.
        reopened = store.facts.reopen_superseded(plan.fact_ids)
        counts = store.facts.delete_facts(plan.fact_ids)
        counts["documents"] = store.documents.delete_empty_documents(plan.bank_id)
        counts["reopened"] = reopened
    return counts


# -- correct ------------------------------------------------------------------------------


def correction_item(store: StoreProtocol, old: Fact, text: str, context: str | None = None) -> Any:
    """The new version of a fact: its text, with the old one's speaker, type, tags, source
    and metadata (its document is not taken: retaining that document again would replace
    the correction too). Its relative dates are read as of when the chain's first version
    was said: "next Friday" in the new text means what it meant in the first text (each
    correction is itself said at its own time, so a correction of a correction would
    otherwise drift)."""
    from memcli.display import has_visible_text
    from memcli.retain import RetainItem

    if not has_visible_text(text):  # named as the argument it is, not by the old fact's id
        raise OptionError("the new text is empty or only control characters; nothing stored")
    (item,) = as_corrections(store, old, [RetainItem(text=text, context=context)])
    return item


def as_corrections(store: StoreProtocol, old: Fact, items: list[Any]) -> list[Any]:
    """Items of `mem retain --supersedes` as correction_item makes `mem correct`'s: what an
    item does not say (speaker, tags, type, source, metadata) is the old fact's, and its
    relative dates are read as of the chain's first version. Changed in place."""
    earlier = _earlier_versions(store, old.id)
    first = store.facts.facts_by_id(earlier[:1]).get(earlier[0], old) if earlier else old
    for item in items:
        item.source_id = item.source_id if item.source_id is not None else old.source_id
        item.context = item.context if item.context is not None else old.context
        item.tags = list(item.tags) or list(old.tags)
        item.fact_type = item.fact_type or old.fact_type
        item.metadata = dict(item.metadata) or dict(old.metadata)
        if item.dates_from is None:
            item.dates_from = first.mentioned_at
    return items


def current_fact(store: StoreProtocol, bank: str, fact_id: int) -> Fact:
    """A fact that is still valid (one that can be corrected), or LifecycleError."""
    old = store.facts.facts_by_id([fact_id], store.banks.require_bank(bank)).get(fact_id)
    if old is None:
        raise LifecycleError(f"no fact {fact_id} in bank {bank!r}; nothing stored")
    if old.superseded_by is not None or old.invalid_at is not None:
        by = f" by fact {old.superseded_by}" if old.superseded_by else ""
        raise LifecycleError(
            f"fact {fact_id} was already corrected{by}: correct the current version instead"
        )
    return old


def retain_superseding(
    store: StoreProtocol,
    old: Fact,
    retainer: Any,
    items: list[Any],
    progress: Callable[[int], None] | None = None,
) -> tuple[Any, list[int]]:
    """Retain items (with `retainer`, which must keep what it stores) as the new version of
    `old` and close `old` at the time they are recorded, in one transaction. Returns (retain
    summary, new fact ids); the first new fact is recorded as old's successor.

    The retainer's `now` is the time of the correction: the new facts are recorded (and,
    without a time of their own, said) then, so `--as-of` just before it still answers with
    the old fact."""
    recorded = retainer.now
    if old.created_at is not None and recorded < old.created_at:
        raise LifecycleError(
            f"a correction at {iso(recorded)} would come before fact {old.id} was recorded "
            f"({iso(old.created_at)})"
        )
    for item in items:
        if item.timestamp is None:
            item.timestamp = recorded
    retainer.keep_stored = True
    with store.atomic():
        summary = retainer.retain(items, progress)
        if summary.interrupted:
            raise KeyboardInterrupt
        new_ids = [s["id"] for s in summary.stored]
        if not new_ids:
            raise LifecycleError(
                f"nothing new was stored (identical to a stored fact); fact {old.id} left as it was"
            )
        if not store.facts.close_fact(old.id, recorded, new_ids[0]):
            # Another process corrected or forgot it since it was read: what was stored
            # here is rolled back with this error.
            now = store.facts.facts_by_id([old.id]).get(old.id)
            if now is None:
                raise LifecycleError(f"fact {old.id} was forgotten meanwhile; nothing stored")
            by = f" by fact {now.superseded_by}" if now.superseded_by else ""
            raise LifecycleError(
                f"fact {old.id} was corrected meanwhile{by}: correct the current version "
                "instead; nothing stored"
            )
    return summary, new_ids


# A new fact this close (cosine) to an older valid fact of the same speaker may correct it:
# near-duplicates with one detail changed score ~0.84-0.91 with MiniLM ("two cats" / "three
# cats now"), paraphrases ~0.7-0.8, unrelated facts ~0.
POSSIBLY_SUPERSEDES_COSINE = 0.8
POSSIBLY_SUPERSEDES_NEIGHBOURS = 10


def note_possible_supersessions(
    store: StoreProtocol, bank: str, stored: list[dict[str, Any]]
) -> None:
    """Add "possibly_supersedes" (ids, most similar first) to each fact retain reports: older,
    still valid facts of the same context that the new one nearly repeats. Only a hint for
    the caller (`mem correct` acts); nothing is changed."""
    bank_id = store.banks.bank_id(bank)
    if bank_id is None or not stored:
        return
    ids = [s["id"] for s in stored]
    facts = store.facts.facts_by_id(ids, bank_id)
    vectors = store.vectors.vectors_for(ids)
    for s in stored:
        s["possibly_supersedes"] = []
        f, vec = facts.get(s["id"]), vectors.get(s["id"])
        if f is None or vec is None:
            continue
        near = [
            (other, cos)
            for other, cos in store.vectors.nearest(bank_id, vec, POSSIBLY_SUPERSEDES_NEIGHBOURS)
            if other != f.id and cos >= POSSIBLY_SUPERSEDES_COSINE
        ]
        olds = store.facts.facts_by_id([o for o, _ in near], bank_id)
        speaker = (f.context or "").strip().lower()
        s["possibly_supersedes"] = [
            o
            for o, _ in sorted(near, key=lambda pair: -pair[1])
            if o in olds
            and olds[o].invalid_at is None
            and (olds[o].context or "").strip().lower() == speaker
            and olds[o].mentioned_at < f.mentioned_at
        ]


# -- re-embedding -------------------------------------------------------------------------


def embedding_text(
    text: str,
    context: str | None,
    occurred_start: str | None,
    occurred_end: str | None,
    lead_in: str | None,
    section: str | None,
    spellings: Sequence[Sequence[str]],
) -> str:
    """What retain embedded for a stored fact, rebuilt from the store: the same text, time
    phrase, section (metadata "section") and lead-in (for a fact with a section, the
    indexed lead-in is that section); an entity is named in brackets only when none of its
    spellings is in the text (retain named the extracted spans, which are in the text)."""
    from memcli.retain import embed_text
    from memcli.timeparse import TimeSpan

    span = None
    if occurred_start:
        start = datetime.fromisoformat(occurred_start)
        span = TimeSpan(start, datetime.fromisoformat(occurred_end) if occurred_end else start)
    lowered = text.lower()
    names = [names[0] for names in spellings if not any(n.lower() in lowered for n in names if n)]
    if section is not None:
        lead_in = None
    return embed_text(
        text, context, span, names, _unindex(lead_in) if lead_in else None, section or None
    )


def _staged_vectors(embedder: Any, rows: Sequence[Sequence[Any]]) -> list[tuple[int, bytes]]:
    """(fact id, its vectors as one float32 blob) for rows of embedding_inputs: the fact's
    own vector first, then one per sentence of retain.sentence_texts (store reembed splits
    them at the swap)."""
    import numpy as np

    from memcli.retain import sentence_texts

    texts: list[str] = []
    spans: list[tuple[int, int]] = []
    for r in rows:
        start = len(texts)
        texts.append(embedding_text(*r[1:]))
        texts.extend(sentence_texts(r[1], r[2], r[6] or None))
        spans.append((start, len(texts)))
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    return [(r[0], vectors[a:b].tobytes()) for r, (a, b) in zip(rows, spans)]


def _unindex(indexed: str) -> str:
    """The FTS form of a text back to plain (index_text spaces out CJK characters)."""
    import re

    from memcli.fts import _CJK

    return re.sub(f" ?([{_CJK}]) ?", r"\1", indexed)


@dataclass
class ReembedReport:
    bank: str
    embedder: str
    fingerprint: str | None
    facts: int
    embedded: int  # in this run
    resumed: int  # staged by an earlier, interrupted run
    seconds: float
    interrupted: bool = False


def reembed(
    store: StoreProtocol,
    bank: str,
    embedder: Any,
    *,
    batch: int = REEMBED_BATCH,
    progress: Callable[[int], None] | None = None,
    on_total: Callable[[int, int], None] | None = None,
) -> ReembedReport:
    """Re-embed every fact of the bank with `embedder` (see the module docstring). Ctrl-C
    keeps the committed batches; running it again with the same model resumes."""
    import time

    started = time.perf_counter()
    bank_id = store.banks.require_bank(bank)
    name = embedder.name
    fingerprint = getattr(embedder, "fingerprint", None)
    dim = int(embedder.dim)
    have_dim = store.vectors.vector_dim()
    if have_dim is not None and have_dim != dim:
        others = store.reembed.other_banks_with_vectors(bank_id)
        if others:
            raise LifecycleError(
                f"{name} makes {dim}-dimensional vectors but bank(s) {', '.join(others)} in "
                f"this file hold {have_dim}: export this bank and import it with "
                "a re-embedding ({reembed}) into another store"
            )
    wanted = {"embedder": name, "fingerprint": fingerprint, "dim": dim}
    state = store.reembed.reembed_state(bank_id)
    with store.atomic():
        if state != wanted:
            store.reembed.begin_reembed(bank_id, wanted)
    total = store.facts.fact_count(bank_id)
    resumed = store.reembed.staged_count(bank_id)
    if on_total:
        on_total(total, resumed)
    embedded = 0
    report = ReembedReport(bank, name, fingerprint, total, 0, resumed, 0.0)
    try:
        last = -1
        while True:
            rows = store.reembed.embedding_inputs(bank_id, last, batch, skip_staged=True)
            if not rows:
                break
            blobs = _staged_vectors(embedder, rows)
            try:
                with store.atomic():
                    _still_ours(store, bank_id, wanted)
                    store.reembed.stage_vectors(bank_id, blobs)
            except InterruptedAfterCommit:
                embedded += len(rows)  # staged: "so far" counts it
                raise
            embedded += len(rows)
            last = rows[-1][0]
            if progress:
                progress(len(rows))
        try:
            with store.atomic():
                _still_ours(store, bank_id, wanted)
                # Facts retained since the batches above (another process) are embedded
                # here, inside the swap's transaction, so no fact is left without a vector.
                late = store.reembed.embedding_inputs(bank_id, -1, 1_000_000, skip_staged=True)
                if late:
                    store.reembed.stage_vectors(bank_id, _staged_vectors(embedder, late))
                    embedded += len(late)
                store.reembed.swap_in_staged_vectors(bank_id, name, fingerprint, dim)
        except InterruptedAfterCommit:
            pass  # swapped in: done, nothing was left to stop (it said "old vectors")
    except KeyboardInterrupt:
        report.interrupted = True
    report.embedded = embedded
    report.seconds = time.perf_counter() - started
    return report


def _still_ours(store: StoreProtocol, bank_id: int, wanted: dict[str, Any]) -> None:
    """Raise LifecycleError when another re-embedding of the bank, with another model, has
    started since this one did (it cleared the staging table: vectors of two models would
    mix under one model's name). Called inside the batch's transaction."""
    state = store.reembed.reembed_state(bank_id)
    if state == wanted:
        return
    if not store.banks.bank_exists(bank_id):
        raise LifecycleError(
            "the bank was deleted by another process meanwhile; nothing to re-embed"
        )
    if state is None:
        raise LifecycleError(
            "another process finished a re-embedding of this bank meanwhile; this one "
            "stopped: run it again to re-embed with this model"
        )
    raise LifecycleError(
        f"a re-embedding with {state.get('embedder')} started meanwhile in another process; "
        "this one stopped (the bank keeps its vectors until one of them finishes)"
    )


def _id_list(ids: Sequence[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:5])
    return shown + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
