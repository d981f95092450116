"""`Memory`: mem as a library. The one object that does the work under every front end.

    from memcli import Memory

    with Memory("notes.db") as memory:
        memory.retain("Maya decided to fly to Lisbon on May 9.", at="2026-03-21")
        for hit in memory.recall("When does Maya fly?").results:
            print(hit.id, hit.text)

A `Memory` is one store (a SQLite file, or a postgresql:// URL: a database on a PostgreSQL
server with pgvector) and a default bank in it, with the models it needs
loaded once and kept (a long-lived Memory embeds its tenth query as fast as its second). The
CLI, the MCP server and the llm plugin are adapters over it: they parse their input, call a
method, and render what it returns. Every argument is checked here, once; every error is a
`MemError` naming the argument (`field`) and whether it is a usage error.

Times may be given as `datetime` (aware ones are converted; naive ones are UTC, the store's
form) or as text: ISO 8601 ("2026-03-21" is that day on the user's calendar), epoch seconds,
or natural language ("yesterday 5pm", read in the user's local time zone).
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from memcli.enums import Budget, FactType, TagsMatch
from memcli.errors import Cancelled, MemError
from memcli.results import (
    BankInfo,
    CorrectResult,
    FactDetail,
    FactRecord,
    ForgetResult,
    ImportResult,
    ReembedResult,
    RetainResult,
    Stats,
)

__all__ = ["Memory"]

When = datetime | str | None


def _usage(message: str, field: str | None = None) -> MemError:
    return MemError(message, field=field, usage=True)


def parse_time(value: When, field: str) -> datetime | None:
    """A time argument as the library holds it (aware datetimes and text both taken)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        from memcli.timeparse import to_utc_naive

        return to_utc_naive(value)
    if not isinstance(value, str):
        raise _usage(f"must be a date or time, not {type(value).__name__}", field)
    from memcli.timeparse import parse_when

    try:
        return parse_when(value)
    except ValueError as exc:
        raise _usage(str(exc), field) from None


_NOUNS = {FactType: "type", Budget: "budget", TagsMatch: "tags mode"}


def _choice(value: Any, kind: type, field: str) -> str:
    """A value of one of the enums (or its plain string), checked."""
    try:
        return kind(value).value
    except ValueError:
        allowed = ", ".join(kind.values())
        raise _usage(f"unknown {_NOUNS[kind]} {value!r} (use {allowed})", field) from None


def stop_if(cancelled: Callable[[], bool] | None) -> None:
    """Raise Cancelled when the caller has given up (checked before each write)."""
    if cancelled is not None and cancelled():
        raise Cancelled("cancelled before it was written: nothing was changed")


def _positive(value: int | None, field: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise _usage("must be a positive whole number", field)


# How many facts one guarded forget (forget_guarded: an agent's, through MCP) may remove.
DEFAULT_FORGET_LIMIT = 100


class Memory:
    """One store and a default bank in it (see the module docstring). A context manager;
    safe to share between threads: reads (recall, list, show, banks, stats) run in parallel
    on read-only connections of their own (memcli/readpool.py), writes one at a time on the
    one writing connection, and a read never waits for a write."""

    def __init__(
        self,
        db: str | os.PathLike[str] | None = None,
        bank: str = "default",
        *,
        embedder: str | None = None,
        reranker: str | None = None,
        budget: Budget | str = Budget.mid,
        max_tokens: int = 4096,
        forget_limit: int = DEFAULT_FORGET_LIMIT,
        readers: int | None = None,
    ) -> None:
        from memcli.paths import resolve_db_path
        from memcli.readpool import DEFAULT_READERS, ReadPool

        try:
            self.db = resolve_db_path(db)
        except ValueError as exc:
            raise _usage(str(exc), "db") from None
        self.bank = self._bank_name(bank)
        # An explicit embedder (a built-in name or a GGUF path) wins over each bank's own.
        self.embedder_name = embedder
        self.reranker_path = reranker
        self.budget = _choice(budget, Budget, "budget")
        _positive(max_tokens, "max_tokens")
        self.max_tokens = max_tokens
        _positive(forget_limit, "forget_limit")
        self.forget_limit = forget_limit
        _positive(readers, "readers")
        # Writes, one at a time: the writing connection is held by one call until it ends.
        self._write_lock = threading.RLock()
        self._pool = ReadPool(self.db, readers or DEFAULT_READERS, upgrade=self._upgrade)
        self._models_lock = threading.Lock()
        # Signs forget previews: a confirmation is only had from this Memory's preview.
        self._forget_key = secrets.token_bytes(16)
        self._store: Any = None
        self._identity: tuple[int, int, int] | None = None
        self._store_calls = 0  # calls inside store() now (they may nest)
        self._embedders: dict[str, Any] = {}
        self._reranker: Any = None
        self._reranker_loaded = False

    # -- lifetime -------------------------------------------------------------------------

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the store (the models stay loaded until the Memory is dropped)."""
        with self._write_lock:
            if self._store is not None:
                self._store.close()
                self._store = None
        self._pool.close()

    @property
    def on_server(self) -> bool:
        """Whether the store is a PostgreSQL database (a postgresql:// URL), not a file."""
        from memcli.storeurl import is_postgres_url

        return is_postgres_url(self.db)

    @property
    def shown_db(self) -> str:
        """The store's location as output may show it (a URL without its password)."""
        from memcli.storeurl import shown

        return shown(self.db)

    def exists(self) -> bool:
        """Whether there is a store at the path yet (retain and import make it). For a URL:
        whether the database holds a mem store (a server that cannot be reached counts as
        one: opening it then says what is wrong)."""
        from memcli.store.location import store_exists

        if self.on_server and self._store is not None:
            return True
        return store_exists(self.db)

    @contextmanager
    def store(
        self,
        create: bool = False,
        readonly: bool = False,
        cancelled: Callable[[], bool] | None = None,
    ) -> Iterator[Any]:
        """The writing connection, held by one call (writes one at a time). It is opened on
        first use and again when the file at the path is no longer the one opened (a backup
        restored over it, or deleted): the old connection answered from the deleted file and
        wrote into the new one's WAL. Only the writes that may make a store pass create=True:
        a read through a mistyped path must not leave an empty store behind. readonly: a file
        it cannot write is opened read-only (a connection already open for writing serves
        too). `cancelled`: asked once the connection is this call's, before any write: a
        call whose caller gave up meanwhile (it waited for another write) stops there. A
        store a read holds alone (on a full disk) is closed when the call is done, never
        kept: it would lock every other process out."""
        from memcli.paths import file_identity
        from memcli.store.location import open_store

        # A database on a server has no file to be replaced under the connection.
        identity = (lambda: None) if self.on_server else (lambda: file_identity(self.db))
        with self._write_lock:
            if self._store is not None and identity() != self._identity:
                self._store.abandon()
                self._store = None
            if self._store is not None and self._store.readonly and not readonly:
                self._store.close()  # a write after reads: open it for writing
                self._store = None
            if self._store is None:
                self._store = open_store(self.db, create=create and not readonly, readonly=readonly)
                self._identity = identity()
            self._store_calls += 1
            try:
                stop_if(cancelled)
                yield self._store
            finally:
                self._store_calls -= 1
                if not self._store_calls and self._store is not None and self._store.holds_alone():
                    self._store.close()
                    self._store = None

    @contextmanager
    def reading(self) -> Iterator[Any]:
        """A read-only connection of the store for one read call, beside the writer and the
        other readers (memcli/readpool.py). The store must exist (callers ask exists())."""
        with self._pool.reader() as store:
            yield store

    def _upgrade(self) -> None:
        """Bring an older store to this mem's schema (the writer's open does)."""
        with self.store():
            pass

    # -- models ---------------------------------------------------------------------------

    def embedder_for(self, store: Any, bank: str, texts: Sequence[str] | None = None) -> Any:
        """The bank's embedder: the Memory's explicit one, else the model the bank was made
        with, else (a new bank) the one its first texts suit. Loaded once per model."""
        from memcli.models import choice
        from memcli.models.load import load_embedder

        bank_id = store.banks.bank_id(bank) if store is not None else None
        recorded = store.vectors.bank_embedder(bank_id)[0] if bank_id is not None else None
        spec = choice.for_bank(recorded, self.embedder_name, texts, bank=bank).spec
        return self._loaded(spec, load_embedder)

    def named_embedder(self, name: str | None = None) -> Any:
        """A model by name or path (None: the Memory's explicit one, else the default)."""
        from memcli.models.choice import DEFAULT_NAME
        from memcli.models.load import load_embedder

        spec = name or self.embedder_name or DEFAULT_NAME
        return self._loaded(spec, load_embedder)

    def _loaded(self, spec: str, load: Callable[[str], Any]) -> Any:
        """The model `spec`, loaded once however many calls ask for it at the same time."""
        with self._models_lock:
            if spec not in self._embedders:
                self._embedders[spec] = load(spec)
            return self._embedders[spec]

    def active_embedder(self, bank: str | None = None) -> dict[str, Any]:
        """Which embedder the bank's recalls use and why (memcli/modelcheck.py)."""
        from memcli import modelcheck

        bank = self._bank(bank)
        if not self.exists():
            return modelcheck.active_embedder(None, bank, self.embedder_name)
        with self.reading() as store:
            return modelcheck.active_embedder(store, bank, self.embedder_name)

    def reranker(self) -> Any:
        """The cross-encoder, when one is configured (loaded once)."""
        with self._models_lock:
            return self._load_reranker()

    def _load_reranker(self) -> Any:
        if not self._reranker_loaded:
            if self.reranker_path:
                from memcli.models.reranker import load_reranker

                self._reranker = load_reranker(self.reranker_path)
            self._reranker_loaded = True
        return self._reranker

    # -- names ----------------------------------------------------------------------------

    @staticmethod
    def _bank_name(bank: str | None, field: str = "bank") -> str:
        from memcli.labels import bank_name_problem

        if not isinstance(bank, str):
            raise _usage("must be a bank name", field)
        problem = bank_name_problem(bank)
        if problem:
            raise _usage(problem, field)
        return bank

    def require_bank_name(self, bank: str) -> str:
        """A bank name checked (it need not exist yet)."""
        return self._bank_name(bank)

    def _bank(self, bank: str | None) -> str:
        return self.bank if bank is None else self._bank_name(bank)

    # -- retain ---------------------------------------------------------------------------

    def retain(
        self,
        text: str | None = None,
        *,
        items: Iterable[Any] | None = None,
        at: When = None,
        context: str | None = None,
        tags: Sequence[str] | None = None,
        type: FactType | str | None = None,  # noqa: A002 - the JSON contract's name
        document_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        source_id: str | None = None,
        supersedes: int | None = None,
        append: bool = False,
        documents: Sequence[Any] = (),
        bank: str | None = None,
        hints: bool = True,
        invalid: int = 0,
        progress: Callable[[int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
        speakers: bool = True,
    ) -> RetainResult:
        """Remember `text` and/or `items` (RetainItem objects, or dicts of the JSONL keys:
        id, text, timestamp, context, tags, type, document_id, metadata). The keyword
        arguments are every item's defaults. `supersedes`: this one item corrects that fact
        (closing its validity). `append`: add the items to their documents instead of
        replacing them. `hints`: name the older facts each new one may supersede. Nothing is
        written when any item is bad. `cancelled()`: asked before each write transaction and
        while embedding; once true the call raises Cancelled, having written nothing more.
        Items of a transcript ("Alice: ..." lines, no context given) get their speakers as
        context, and a chat log given as one text is split into its turns (memcli/speakers.py;
        `speakers=False` keeps every text as written; a correction is never split); the
        speakers are set on copies, not on the items passed in."""
        from memcli.ingest import item_from_json, items_from_text
        from memcli.retain import RetainError, RetainItem, check_item

        bank = self._bank(bank)
        defaults = self.item_defaults(
            at=at,
            context=context,
            tags=tags,
            type=type,
            document_id=document_id,
            supersedes=supersedes,
        )
        batch: list[Any] = []
        if text is not None:
            if not isinstance(text, str) or not text.strip():
                # (The CLI reads input that holds nothing as a data error: memcli/ingest.py.)
                raise _usage("is empty: nothing to retain", "text")
            item = items_from_text(text, None, defaults)
            item.metadata = metadata if metadata is not None else {}
            item.source_id = source_id
            item.id_given = source_id is not None
            try:
                batch.append(check_item(item))
            except RetainError as exc:
                raise RetainError(str(exc), usage=True) from None
        for number, given in enumerate(items or [], start=1):
            if isinstance(given, RetainItem):
                batch.append(given)
                continue
            try:
                batch.append(item_from_json(given, defaults))
            except ValueError as exc:
                raise MemError(f"item {number}: {exc}", field="items") from None
        if not batch:
            raise _usage("nothing to retain: give a text or items", "text")
        if supersedes is not None:
            _positive(supersedes, "supersedes")
            if len(batch) > 1:
                # One correction is one item: the second of two was stored as a plain fact.
                raise _usage(f"corrects a fact with one item, not {len(batch)}", "supersedes")
        if append:
            loose = next((i for i, it in enumerate(batch, start=1) if not it.document_id), None)
            if loose is not None:
                raise _usage(
                    f"adds to documents, but item {loose} has none: give it a {{document_id}}",
                    "append",
                )
        texts = [it.text for it in batch]
        model = None
        if not self.exists():
            # No store yet: what can fail without one fails before one is made.
            if supersedes is not None:
                raise MemError(f"no fact {supersedes} in bank {bank!r}; nothing stored")
            model = self.embedder_for(None, bank, texts)
        stop_if(cancelled)
        with self.store(create=True, cancelled=cancelled) as store:
            sources: dict[str, Any] = {}
            unchanged: list[str] = []
            if documents and not append and supersedes is None:
                from memcli.sources.documents import leave_out_unchanged

                batch, sources, unchanged = leave_out_unchanged(store, bank, batch, documents)
                if not batch:
                    return RetainResult.nothing(unchanged)
            result = self._retain_into(
                store,
                bank,
                batch,
                model,
                supersedes,
                append,
                hints,
                invalid,
                progress,
                sources,
                cancelled,
                speakers=speakers,
            )
            result.unchanged = unchanged
            return result

    def item_defaults(
        self,
        *,
        at: When = None,
        context: str | None = None,
        tags: Sequence[str] | None = None,
        type: FactType | str | None = None,  # noqa: A002 - the JSON contract's name
        document_id: str | None = None,
        supersedes: int | None = None,
    ) -> dict[str, Any]:
        """What every item of a retain takes unless it says otherwise, checked (the keys
        memcli.ingest reads: timestamp, context, tags, fact_type, document_id)."""
        from memcli.clock import utcnow
        from memcli.labels import label_problem

        when = parse_time(at, "at")
        if supersedes is not None and when is not None and when > utcnow():
            # A correction closes the old fact at its time: one in the future would leave
            # both current until then (a plan to change is a new memory, not a correction).
            raise _usage("is in the future: a correction is made now or was made earlier", "at")
        fact_type = _choice(type, FactType, "type") if type is not None else None
        if context is not None and not isinstance(context, str):
            raise _usage("must be text", "context")
        for field, values in (("tags", list(tags or [])), ("document_id", [document_id])):
            for value in values:
                if value is None:
                    continue
                if not isinstance(value, str):
                    raise _usage("must be text", field)
                problem = label_problem(value)
                if problem:
                    raise _usage(f"{value!r} {problem}", field)
        return {
            "timestamp": when,
            "context": context,
            "tags": list(tags or []),
            "fact_type": fact_type,
            "document_id": document_id,
        }

    def _retain_into(
        self,
        store: Any,
        bank: str,
        batch: list[Any],
        model: Any,
        supersedes: int | None,
        append: bool,
        hints: bool,
        invalid: int,
        progress: Callable[[int], None] | None,
        sources: dict[str, Any] | None = None,
        cancelled: Callable[[], bool] | None = None,
        speakers: bool = True,
    ) -> RetainResult:
        from memcli import lifecycle
        from memcli.models.choice import language_warning
        from memcli.retain import Retainer

        texts = [it.text for it in batch]
        if model is None or store.banks.bank_id(bank) is not None:
            # (a bank another process made meantime has its own embedder)
            model = self.embedder_for(store, bank, texts)
        retainer = Retainer(
            store,
            bank,
            model,
            keep_stored=True,
            append=append,
            document_sources=sources,
            should_stop=cancelled,
            # A correction is one item: a chat log in it is not split into several.
            speakers=speakers and supersedes is None,
        )
        retainer.summary.invalid = invalid
        if supersedes is None:
            summary = retainer.retain(batch, progress)
        else:
            old = lifecycle.current_fact(store, bank, supersedes)
            if (
                not append
                and old.document_id is not None
                and any(it.document_id == old.document_id for it in batch)
            ):
                # The replace would delete the fact this corrects, in the same write.
                raise _usage(
                    f"fact {supersedes} is part of document {old.document_id!r}, which this "
                    "retain replaces: add it to the document instead (append), or retain the "
                    "document again without a correction",
                    "supersedes",
                )
            batch = lifecycle.as_corrections(store, old, batch)
            summary, _ = lifecycle.retain_superseding(store, old, retainer, batch, progress)
        if hints and summary.stored:
            # The older facts each new one may correct (a hint: `correct` acts).
            lifecycle.note_possible_supersessions(store, bank, summary.stored)
        return RetainResult.of(summary, language_warning(model, texts, bank))

    # -- documents: files, folders, other tools' histories --------------------------------

    def retain_documents(
        self,
        documents: Sequence[Any],
        *,
        bank: str | None = None,
        progress: Callable[[int], None] | None = None,
        on_total: Callable[[int], None] | None = None,
    ) -> Any:
        """Retain whole documents (memcli.sources.documents SourceDocument: a file, a
        conversation of an imported history): a document retained before from the same
        source is left out, a changed one replaced whole. `on_total` is told how many items
        will be retained before the first is. Every item is checked before anything is
        written (or a store made). Returns memcli.sources.documents.DocumentsReport."""
        from memcli.retain import RetainError, check_item
        from memcli.sources.documents import retain_documents, split_by_change

        bank = self._bank(bank)
        for doc in documents:
            for item in doc.items:
                try:
                    check_item(item)
                except RetainError as exc:
                    raise RetainError(f"{doc.label}: {exc}") from None
        with self.store(create=True) as store:
            new, changed, _ = split_by_change(store, bank, documents)
            todo = [i for d in (*new, *changed) for i in d.items]
            if on_total:
                on_total(len(todo))
            sample = [i.text for i in todo[:200]]
            return retain_documents(
                store,
                bank,
                documents,
                lambda: self.embedder_for(store, bank, sample),
                progress=progress,
            )

    def plan_sync(
        self,
        root: str | os.PathLike[str],
        globs: Sequence[str] | None = None,
        *,
        allow_empty: bool = False,
        bank: str | None = None,
    ) -> Any:
        """What a sync of the folder `root` would add, replace and forget (nothing is
        written): memcli.sources.sync.SyncPlan. The store's own files are never notes."""
        from memcli.paths import is_store_file
        from memcli.sources.sync import DEFAULT_GLOBS, check_root, plan_sync

        bank = self._bank(bank)
        folder = check_root(Path(root))
        options = {
            "skip": lambda path: is_store_file(path, self.db),
            "allow_empty": allow_empty,
        }
        if not self.exists():
            return plan_sync(None, bank, folder, list(globs or DEFAULT_GLOBS), **options)
        with self.store(readonly=True) as store:
            return plan_sync(store, bank, folder, list(globs or DEFAULT_GLOBS), **options)

    def sync(
        self,
        plan: Any,
        *,
        bank: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> Any:
        """Carry out a plan_sync plan: forget the documents of files that are gone (one
        transaction), then retain the new and changed files whole. A plan made before the
        store existed is made again against it. Returns memcli.sources.sync.SyncReport."""
        from memcli.sources.sync import SyncReport, run_sync

        bank = self._bank(bank)
        if not (plan.add or plan.replace):
            if not self.exists():
                return SyncReport(plan=plan)
        elif not self.exists():
            with self.store(create=True):
                pass
            plan = self.plan_sync(plan.root, plan.globs, allow_empty=plan.allow_empty, bank=bank)
        sample = [i.text for d in (*plan.add, *plan.replace) for i in d.items][:200]
        with self.store() as store:
            return run_sync(
                store,
                bank,
                plan,
                lambda: self.embedder_for(store, bank, sample),
                progress=progress,
            )

    # -- recall ---------------------------------------------------------------------------

    def recall(
        self,
        query: str,
        *,
        budget: Budget | str | None = None,
        max_tokens: int | None = None,
        limit: int | None = None,
        types: Sequence[FactType | str] | None = None,
        tags: Sequence[str] | None = None,
        tags_match: TagsMatch | str = TagsMatch.any,
        now: When = None,
        as_of: When = None,
        include_chunks: bool = False,
        max_chunk_tokens: int = 8192,
        rerank: bool = True,
        boosts: bool = True,
        arms: Sequence[str] | None = None,
        min_score: float | None = None,
        bank: str | None = None,
    ) -> Any:
        """The memories that best answer `query`, best first, sized to `max_tokens`. Returns
        a memcli.recall.RecallResult: `.results` (what fits), `.ranked` (every candidate),
        `.to_json()` (the JSON contract). A store not made yet has no memories."""
        options = self.recall_options(
            budget=budget,
            max_tokens=max_tokens,
            limit=limit,
            types=types,
            tags=tags,
            tags_match=tags_match,
            now=now,
            as_of=as_of,
            include_chunks=include_chunks,
            max_chunk_tokens=max_chunk_tokens,
            rerank=rerank,
            boosts=boosts,
            arms=arms,
            min_score=min_score,
        )
        return self.recall_with(query, options, bank=bank)

    def recall_options(
        self,
        *,
        budget: Budget | str | None = None,
        max_tokens: int | None = None,
        limit: int | None = None,
        types: Sequence[FactType | str] | None = None,
        tags: Sequence[str] | None = None,
        tags_match: TagsMatch | str = TagsMatch.any,
        now: When = None,
        as_of: When = None,
        include_chunks: bool = False,
        max_chunk_tokens: int = 8192,
        rerank: bool = True,
        boosts: bool = True,
        arms: Sequence[str] | None = None,
        min_score: float | None = None,
    ) -> Any:
        """A recall's options, checked (the request object recall_with takes; `--batch`
        builds one per line)."""
        from memcli.recall import ARMS, RecallOptions, validate

        options = RecallOptions(
            budget=_choice(budget, Budget, "budget") if budget is not None else self.budget,
            max_tokens=self.max_tokens if max_tokens is None else max_tokens,
            limit=limit,
            types=[_choice(t, FactType, "types") for t in types] if types else None,
            tags=list(tags) if tags else None,
            tags_match=_choice(tags_match, TagsMatch, "tags_match"),
            now=parse_time(now, "now"),
            as_of=parse_time(as_of, "as_of"),
            include_chunks=include_chunks,
            max_chunk_tokens=max_chunk_tokens,
            rerank=rerank,
            boosts=boosts,
            arms=tuple(arms) if arms is not None else ARMS,
            min_score=min_score,
        )
        validate(options)
        return options

    def recall_with(self, query: str, options: Any, *, bank: str | None = None) -> Any:
        """Recall with options built by recall_options."""
        from memcli.display import NO_WORDS, has_searchable_text, has_visible_text
        from memcli.recall import recall as run_recall
        from memcli.recall.pipeline import empty_result

        bank = self._bank(bank)
        if not isinstance(query, str) or not has_visible_text(query):
            raise _usage("the query is empty or only spaces and control characters")
        if not has_searchable_text(query):
            raise _usage(NO_WORDS)
        if not self.exists():
            return empty_result(query, options, note="no store yet")
        with self.reading() as store:
            return run_recall(
                store,
                bank,
                query,
                options,
                embedder=lambda: self.embedder_for(store, bank),
                reranker=self.reranker() if options.rerank else None,
            )

    # -- list and show --------------------------------------------------------------------

    def selection(
        self,
        *,
        ids: Sequence[int] | None = None,
        document_id: str | None = None,
        source_id: str | None = None,
        tags: Sequence[str] | None = None,
        tags_match: TagsMatch | str = TagsMatch.any_strict,
        types: Sequence[FactType | str] | None = None,
        context: str | None = None,
        since: When = None,
        until: When = None,
        include_invalid: bool = False,
        as_of: When = None,
        query: str | None = None,
        query_limit: int = 10,
    ) -> Any:
        """Which facts list and forget work on: every criterion given must hold."""
        from memcli.lifecycle import Selection, check_selection

        for fact_id in ids or ():
            _positive(fact_id, "ids")
        sel = Selection(
            ids=list(ids) if ids else None,
            document=document_id,
            source_id=source_id,
            context=context,
            since=parse_time(since, "since"),
            until=parse_time(until, "until"),
            types=tuple(_choice(t, FactType, "types") for t in types) if types else None,
            tags=tuple(tags) if tags else None,
            tags_match=_choice(tags_match, TagsMatch, "tags_match"),
            valid_only=not include_invalid,
            as_of=parse_time(as_of, "as_of"),
            query=query,
            query_limit=query_limit,
        )
        check_selection(sel)
        return sel

    def iter_facts(
        self,
        selection: Any = None,
        *,
        limit: int | None = None,
        offset: int = 0,
        bank: str | None = None,
    ) -> Iterator[FactRecord]:
        """The selected facts, newest said first, streamed from one consistent state of the
        store (the store is held until the iterator is exhausted or closed)."""
        from memcli import lifecycle

        bank = self._bank(bank)
        sel = selection if selection is not None else self.selection()
        _positive(limit, "limit")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise _usage("cannot be negative", "offset")
        if not self.exists():
            return
        with self.reading() as store, store.snapshot():
            for fact in lifecycle.iter_facts(store, bank, sel, limit=limit, offset=offset):
                yield FactRecord.of(fact)

    def list(
        self,
        selection: Any = None,
        *,
        limit: int | None = 100,
        offset: int = 0,
        bank: str | None = None,
    ) -> list[FactRecord]:
        """The selected facts, newest said first (at most `limit`)."""
        return list(self.iter_facts(selection, limit=limit, offset=offset, bank=bank))

    def show(self, ids: Sequence[int], *, bank: str | None = None) -> list[FactDetail]:
        """Each fact whole: times, validity, entities, links, correction history."""
        from memcli import lifecycle

        bank = self._bank(bank)
        if not ids:
            raise _usage("give at least one fact id", "ids")
        for fact_id in ids:
            _positive(fact_id, "ids")
        self._require_store(bank)
        with self.reading() as store, store.snapshot():
            return [FactDetail(**d) for d in lifecycle.show(store, bank, list(ids))]

    def require_bank(self, bank: str) -> None:
        """Raise unless the bank exists (a store not made yet has none)."""
        bank = self._bank_name(bank)
        self._require_store(bank)
        with self.reading() as store:
            store.banks.require_bank(bank)

    def _require_store(self, bank: str) -> None:
        """Raise for a store not made yet: there is nothing to act on (reads that can
        answer "nothing", recall and list, answer so instead)."""
        from memcli.store import StoreError

        if not self.exists():
            raise StoreError(f"no mem store at {self.shown_db} (run `mem retain` first)")

    # -- forget and correct ---------------------------------------------------------------

    def plan_forget(self, selection: Any, *, bank: str | None = None, preview: int = 20) -> Any:
        """What a forget of `selection` would remove (nothing is written)."""
        from memcli import lifecycle

        bank = self._bank(bank)
        self._require_store(bank)
        with self.reading() as store:
            return lifecycle.plan_forget(
                store,
                bank,
                selection,
                embedder=lambda: self.embedder_for(store, bank),
                preview=preview,
            )

    def forget(
        self,
        selection: Any,
        *,
        dry_run: bool = False,
        bank: str | None = None,
        plan: Any = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> ForgetResult:
        """Forget the selected facts for good, in one transaction (dry_run: say what would
        go). `plan`: the plan_forget already shown for this selection (its facts are the
        ones removed, not a selection read again later)."""
        from memcli import lifecycle

        bank = self._bank(bank)
        if plan is None:
            plan = self.plan_forget(selection, bank=bank)
        if dry_run or not plan.fact_ids:
            return ForgetResult.of(plan, dry_run, None)
        with self.store(cancelled=cancelled) as store:
            counts = lifecycle.forget(store, plan)
        return ForgetResult.of(plan, False, counts)

    def forget_guarded(
        self,
        selection: Any,
        *,
        confirm: str | None = None,
        dry_run: bool = False,
        bank: str | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> ForgetResult:
        """A forget for a caller no one can ask first (an agent, through MCP). Facts named by
        id go at once. Any other selection (a tag, a time range, a query...) first answers
        with its preview, removing nothing, and a confirmation token (`confirm` in its
        JSON); it goes only when called again with that token while it still selects
        exactly the facts previewed. No call removes more than `forget_limit` facts: a
        selection of more is refused whole. dry_run: the preview, whatever was selected."""
        bank = self._bank(bank)
        plan = self.plan_forget(selection, bank=bank)
        count = len(plan.fact_ids)
        named = bool(selection.ids)
        if count > self.forget_limit:
            how = "name" if named else "select"
            raise MemError(
                f"refused: these {how} {count} facts, more than one forget removes here "
                f"({self.forget_limit}, the forget_limit setting); nothing was forgotten: "
                + (
                    "forget them in smaller calls"
                    if named
                    else "narrow the selection, or name the facts by {ids}"
                ),
                usage=True,
            )
        token = self._forget_token(plan) if plan.fact_ids and not named else None
        if dry_run or (token is not None and confirm != token):
            if confirm is not None and not dry_run:
                raise MemError(
                    f"the {{confirm}} token is not this selection's: it selects {count} facts "
                    "now, which were not previewed (the store changed, or the selection "
                    "differs); nothing was forgotten: preview it again without {confirm}",
                    field="confirm",
                    usage=True,
                )
            return ForgetResult.of(plan, True, None, token=token)
        return self.forget(selection, bank=bank, plan=plan, cancelled=cancelled)

    def _forget_token(self, plan: Any) -> str:
        """The confirmation of one preview: this Memory's signature of the bank and the
        exact facts it would remove (no other set of facts has it)."""
        import hashlib
        import hmac

        what = f"{self.db.resolve()}\0{plan.bank_id}\0{','.join(map(str, plan.fact_ids))}"
        return hmac.new(self._forget_key, what.encode(), hashlib.sha256).hexdigest()[:20]

    def correct(
        self,
        fact_id: int,
        text: str,
        *,
        at: When = None,
        context: str | None = None,
        bank: str | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> CorrectResult:
        """Store `text` as the new version of a fact and close the old one at `at`
        (default now); the old one stays for `as_of`."""
        from memcli import lifecycle
        from memcli.clock import utcnow
        from memcli.retain import Retainer

        bank = self._bank(bank)
        _positive(fact_id, "fact_id")
        when = parse_time(at, "at")
        if when is not None and when > utcnow():
            raise _usage("is in the future: a correction is made now or was made earlier", "at")
        if not self.exists():
            raise MemError(f"no fact {fact_id} in bank {bank!r}; nothing stored")
        with self.store(cancelled=cancelled) as store:
            old = lifecycle.current_fact(store, bank, fact_id)
            item = lifecycle.correction_item(store, old, text, context)
            model = self.embedder_for(store, bank)
            retainer = Retainer(store, bank, model, now=when, should_stop=cancelled)
            _, new_ids = lifecycle.retain_superseding(store, old, retainer, [item])
        return CorrectResult.of(fact_id, new_ids, retainer.now)

    # -- banks, stats, doctor -------------------------------------------------------------

    def banks(self) -> list[BankInfo]:
        """Every bank: facts, documents, entities, links, first and last, embedder."""
        if not self.exists():
            return []
        with self.reading() as store, store.snapshot():
            rows = store.banks.bank_stats()
            for row in rows:
                bank_id = store.banks.bank_id(row["bank"])
                pending = store.reembed.reembed_state(bank_id) if bank_id is not None else None
                row["reembedding"] = pending["embedder"] if pending else None
        return [BankInfo(**row) for row in rows]

    def rename_bank(self, old: str, new: str) -> None:
        from memcli.store import check_bank_name

        self._bank_name(old, "old")
        self._bank_name(new, "new")
        self._require_store(old)
        with self.store() as store:
            check_bank_name(new)
            bank_id = store.banks.require_bank(old)
            with store.atomic():
                store.banks.rename_bank(bank_id, new)

    def bank_size(self, name: str) -> int:
        """How many facts a bank holds (for a question before deleting it)."""
        self._bank_name(name)
        self._require_store(name)
        with self.reading() as store:
            return store.facts.fact_count(store.banks.require_bank(name))

    def delete_bank(self, name: str) -> dict[str, int]:
        """Delete a bank and everything it holds, in one transaction."""
        self._bank_name(name)
        self._require_store(name)
        with self.store() as store:
            bank_id = store.banks.require_bank(name)
            with store.atomic():
                return store.banks.delete_bank(bank_id)

    def stats(self) -> Stats:
        """The store's path and what each bank holds (a store not made yet: no banks)."""
        if not self.exists():
            return Stats(db=str(self.db), embedder=None, banks=[])
        with self.reading() as store, store.snapshot():
            rows = store.banks.bank_stats()
            embedder = store.vectors.store_embedder()
        return Stats(db=self.shown_db, embedder=embedder, banks=rows)

    def doctor(self, progress: Callable[[str], None] | None = None) -> list[Any]:
        """Every health check of the installation and the store (memcli/doctor.py)."""
        from memcli import doctor

        self.close()  # the doctor opens the store its own way (read-only when it must)
        return doctor.run(
            self.db, self.embedder_name, progress=progress, reranker=self.reranker_path
        )

    # -- export, import, re-embed ---------------------------------------------------------

    def export_lines(
        self, *, bank: str | None = None, with_vectors: bool = False
    ) -> tuple[dict[str, Any], Iterator[str]]:
        """(header, lines): the bank as export JSONL lines, from one consistent state.
        Consume the lines before the next call on this Memory."""
        from memcli import exchange
        from memcli.store.location import open_store

        bank = self._bank(bank)
        self._require_store(bank)
        # A connection of its own, closed with the lines: they are read after this returns,
        # while other calls use the pooled ones.
        store = open_store(self.db, create=False, readonly=True)
        try:
            header, lines = exchange.export_lines(store, bank, with_vectors=with_vectors)
        except BaseException:
            store.close()
            raise
        return header, _Closing(lines, store)

    def export(
        self,
        out: IO[str] | str | os.PathLike[str],
        *,
        bank: str | None = None,
        with_vectors: bool = False,
        progress: Callable[[int], None] | None = None,
        on_header: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Write the bank as export JSONL to a stream, or to a file (written whole or not
        at all, private as the store is; a symlink's target, the link kept; a FIFO or
        device written into). Never into the store itself or its log, nor over another
        SQLite file. Returns the export's header (its counts). `progress` counts facts."""
        target = None if hasattr(out, "write") else self.export_target(out)  # type: ignore[arg-type]
        header, lines = self.export_lines(bank=bank, with_vectors=with_vectors)
        try:
            if on_header:
                on_header(header)
            if target is None:
                _write_export(out, lines, progress)  # type: ignore[arg-type]
            elif not target.is_file() and target.exists():
                with open(target, "w", encoding="utf-8") as fh:
                    _write_export(fh, lines, progress)
            else:
                from memcli.paths import write_atomically

                def write(tmp: Path) -> None:
                    with open(tmp, "w", encoding="utf-8") as fh:
                        _write_export(fh, lines, progress)

                write_atomically(target, write, mode=0o600, parents=False)
        except OSError as exc:
            shown = out if target is not None else "the output"
            raise MemError(f"cannot write {shown}: {exc.strerror or exc}") from None
        finally:
            lines.close()  # ends the read transaction even when the writer stopped early
        return header

    def export_target(self, path: str | os.PathLike[str]) -> Path:
        """Where an export to `path` goes: a symlink's target (the link stays). Refused for
        the store itself or its -wal/-shm/-journal, and for any other SQLite file: writing
        the export over it would destroy a database."""
        from memcli.paths import STORE_SIBLINGS, is_store_file
        from memcli.store import is_sqlite_file

        given = Path(path)
        if not given.name:  # '', '.', '/': no file to write
            raise _usage(f"{str(path)!r} is not a file name", "output")
        target = given.resolve()
        # (A store on a server, self.db its URL, has no file here to be written over.)
        if not self.on_server:
            store = self.db.resolve()
            if target in {store, *(Path(f"{store}{end}") for end in STORE_SIBLINGS)} or (
                is_store_file(target, store)
            ):
                raise MemError(f"refusing to export into the store's own file {path}")
        if is_sqlite_file(target):
            raise MemError(f"refusing to overwrite {path}: it is an SQLite database")
        return target

    def import_(
        self,
        lines: Iterable[str],
        *,
        name: str = "input",
        into: str | None = None,
        reembed: bool = False,
        progress: Callable[[int], None] | None = None,
        on_header: Callable[[dict[str, Any]], None] | None = None,
        on_stage: Callable[[str], None] | None = None,
    ) -> ImportResult:
        """Import a `mem export` file (its lines) into a new bank, all or nothing. `into`:
        the bank's name (default: the file's). Into a path with no store yet, the store
        appears only when the import succeeds."""
        from memcli import exchange
        from memcli.lifecycle import LifecycleError
        from memcli.models import ModelError, choice

        if into is not None:
            self._bank_name(into, "into")
        seen: dict[str, Any] = {}

        def remember_header(header: dict[str, Any]) -> None:
            seen.update(header)
            if on_header:
                on_header(header)

        def bank_model() -> Any:
            """The explicit embedder; else the model the file names, when mem has it (its
            vectors are used as they are); else, for vectors computed anew, the default."""
            named = None if reembed else seen["bank"].get("embedder")
            bank_name = into or seen["bank"]["name"]
            try:
                spec = choice.for_bank(named, self.embedder_name, bank=bank_name).spec
            except ModelError:
                if seen.get("vectors"):
                    raise LifecycleError(
                        f"{name} holds vectors of {named}, a model file mem does not ship: "
                        "give that model as the {embedder}, or re-embed the facts on import "
                        "({reembed})"
                    ) from None
                spec = choice.for_bank(None, self.embedder_name, bank=bank_name).spec
            return self.named_embedder(spec)

        def run(store: Any) -> Any:
            return exchange.import_lines(
                store,
                lines,
                name=name,
                bank=into,
                embedder=bank_model,
                reembed=reembed,
                progress=progress,
                on_header=remember_header,
                on_stage=on_stage,
            )

        with self._write_lock:
            # On a server the import is one transaction: a failed one leaves nothing.
            if self.on_server or self.exists():
                with self.store(create=True) as store:
                    report = run(store)
            else:
                from memcli.store import fill_new_store

                report = fill_new_store(self.db, run)
        return ImportResult.of(report)

    def reembed(
        self,
        embedder: str | None = None,
        *,
        bank: str | None = None,
        progress: Callable[[int], None] | None = None,
        on_total: Callable[[int, int], None] | None = None,
    ) -> ReembedResult:
        """Re-embed every fact of the bank with `embedder` (default: the Memory's, else the
        default model), in resumable batches; the bank keeps its old vectors until the
        last batch swaps the new ones in."""
        from memcli import lifecycle

        bank = self._bank(bank)
        model = self.named_embedder(embedder)
        self._require_store(bank)
        with self.store() as store:
            report = lifecycle.reembed(store, bank, model, progress=progress, on_total=on_total)
        return ReembedResult(**report.__dict__)


class _Closing:
    """Lines that close their store when exhausted or closed (even before the first line:
    a generator's finally would not run then)."""

    def __init__(self, lines: Iterator[str], store: Any) -> None:
        self._lines = lines
        self._store = store

    def __iter__(self) -> _Closing:
        return self

    def __next__(self) -> str:
        try:
            return next(self._lines)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        close = getattr(self._lines, "close", None)
        try:
            if close is not None:
                close()
        finally:
            if self._store is not None:
                self._store.close()
                self._store = None


def _write_export(
    fh: IO[str], lines: Iterable[str], progress: Callable[[int], None] | None
) -> None:
    for line in lines:
        fh.write(line)
        fh.write("\n")
        if progress is not None and line.startswith('{"kind":"fact"'):
            progress(1)
