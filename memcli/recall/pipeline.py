"""Recall: query -> arms -> fusion -> rerank -> scoring -> budget.

The keyword arm needs no embedding, so it runs on its own connection in a second thread while
the query is embedded. Then the temporal arm (a question about a time) runs on another
connection beside the semantic arm, searching with the main connection's scan of the bank's
vectors, and the graph arm expands the semantic seeds on a connection of its own while the
main thread reads the semantic hits' facts (apsw releases the GIL inside SQLite). Each arm on
a second connection also reads its hits' facts there: reading the ~700 candidates' facts
after fusion was ~5 ms of a 100k-fact recall on the critical path.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import threading
import time
from collections.abc import Container, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import numpy as np

from memcli import tokens
from memcli.blocks import block_tokens, block_tokens_at_least
from memcli.clock import local_to_utc, utc_to_local, utcnow
from memcli.display import NO_WORDS, has_searchable_text, has_visible_text
from memcli.errors import MemError
from memcli.recall import budget as budget_mod
from memcli.recall import (
    document,
    floor,
    fusion,
    graph,
    keyword,
    replies,
    rerank,
    scoring,
    semantic,
    temporal,
)
from memcli.recall.filters import FactFilter
from memcli.recall.types import (
    ARMS,
    TAG_MODES,
    ArmContext,
    ArmResult,
    RecallOptions,
    RecallResult,
)
from memcli.settings import BUDGETS, RERANK_CAPS, RecallSettings
from memcli.store import FACT_TYPES, Fact, StoreError
from memcli.store.protocol import StoreProtocol
from memcli.timeparse import OPEN_START, TimeSpan, asks_when, query_window_phrase


class RecallError(MemError, ValueError):
    """Bad recall input (one-line message)."""


def validate(options: RecallOptions) -> None:
    if options.budget not in BUDGETS:
        raise RecallError(
            f"unknown value {options.budget!r} (use low, mid or high)", field="budget", usage=True
        )
    if options.max_tokens <= 0:
        raise RecallError("must be positive", field="max_tokens", usage=True)
    if options.limit is not None and options.limit <= 0:
        raise RecallError("must be positive", field="limit", usage=True)
    if options.max_chunk_tokens <= 0:
        raise RecallError("must be positive", field="max_chunk_tokens", usage=True)
    if options.min_score is not None and not math.isfinite(options.min_score):
        raise RecallError(
            f"must be a finite number, not {options.min_score}", field="min_score", usage=True
        )
    unknown = [a for a in options.arms if a not in ARMS]
    if unknown or not options.arms:
        raise RecallError(
            f"unknown arm {unknown[0] if unknown else ''!r} (use {', '.join(ARMS)})",
            field="arms",
            usage=True,
        )
    from memcli.labels import label_problem

    for tag in options.tags or ():
        problem = label_problem(tag)
        if problem:  # as retain refuses it: no fact can carry such a tag
            raise RecallError(f"{tag!r} {problem}", field="tags", usage=True)
    if options.tags_match not in TAG_MODES:
        raise RecallError(
            f"unknown value {options.tags_match!r} (use {', '.join(TAG_MODES)})",
            field="tags_match",
            usage=True,
        )
    for t in options.types or []:
        if t not in FACT_TYPES:
            raise RecallError(
                f"unknown type {t!r} (use {', '.join(FACT_TYPES)})", field="types", usage=True
            )


# Recalls redone when another process commits while the arms read on several connections;
# the last try reads everything on one connection in one read transaction.
SPREAD_TRIES = 2


def recall(
    store: StoreProtocol,
    bank: str,
    query: str,
    options: RecallOptions,
    *,
    embedder: Any,
    reranker: Any | None = None,
    settings: RecallSettings | None = None,
) -> RecallResult:
    """Run the whole pipeline for one query. `embedder` may be a zero-argument callable that
    returns the embedder, so a keyword-only recall never loads a model.

    The arms read on two connections at once, each its own read, so a commit by another
    process between them (a document's replace swapped in) would mix two states of the
    store: one arm's hits from the old version, the facts read from the new. The store's
    change token before and after tells; a recall that saw a commit is done again, and after
    SPREAD_TRIES on one connection inside one read transaction."""
    validate(options)
    args = (store, bank, query, options)
    kw = {"embedder": embedder, "reranker": reranker, "settings": settings}
    with collector_paused():
        for _ in range(SPREAD_TRIES):
            before = store.change_token()
            result = _recall_once(*args, **kw, spread=True)
            if store.change_token() == before:
                return result
        with store.snapshot():
            return _recall_once(*args, **kw, spread=False)


def empty_result(query: str, options: RecallOptions, note: str) -> RecallResult:
    """A recall that found nothing because there is nothing to search (no store yet): no
    results, the options it was asked with, and why in its notes."""
    return RecallResult(
        query=query,
        now=options.now or utcnow(),
        budget=options.budget,
        max_tokens=options.max_tokens,
        total_tokens=0,
        reranker=None,
        synthetic_scores=True,
        time_window=None,
        results=[],
        ranked=[],
        arms={},
        timings={},
        notes={"store": note},
        limit=options.limit,
        min_score=options.min_score,
    )


_collector_lock = threading.Lock()
_collector_pausers = 0
_collector_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while recalls run (in any thread), as it was
    after the last one. A recall makes thousands of short-lived objects (candidates, facts,
    scores) that plain reference counting frees, and no cycles; yet their count set the
    collector off ~10 times a query, each pass holding every thread of the recall: 2.1 ms
    a query over a 30-query batch at 100k facts, its longest pauses ~10 ms."""
    global _collector_pausers, _collector_was_enabled
    paused = False
    try:  # a Ctrl-C as it pauses still restores it
        with _collector_lock:
            if _collector_pausers == 0:
                _collector_was_enabled = gc.isenabled()
                gc.disable()
            _collector_pausers += 1
            paused = True
        yield
    finally:
        if paused:
            with _collector_lock:
                _collector_pausers -= 1
                if _collector_pausers == 0 and _collector_was_enabled:
                    gc.enable()


def _recall_once(
    store: StoreProtocol,
    bank: str,
    query: str,
    options: RecallOptions,
    *,
    embedder: Any,
    reranker: Any | None,
    settings: RecallSettings | None,
    spread: bool,
) -> RecallResult:
    """One run of the pipeline; `spread`: the keyword and graph arms on connections of their
    own (in parallel), else all on the store's connection."""
    settings = settings or RecallSettings()
    if not query or not has_visible_text(query):
        raise RecallError("the query is empty or only control characters")
    if not has_searchable_text(query):
        raise RecallError(NO_WORDS)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    now = options.now or utcnow()
    bank_id = store.banks.require_bank(bank)
    created = store.banks.bank_created_at(bank_id)
    if options.as_of is not None and created is not None and options.as_of < created:
        raise RecallError(
            f"{options.as_of.isoformat()} is before bank {bank!r} existed "
            f"(created {created.isoformat()})",
            field="as_of",
        )
    # "yesterday" in a question is the day before the user's local today (as in retain).
    found = query_window_phrase(query, utc_to_local(now))
    window, time_words = found if found else (None, None)
    limit = BUDGETS[options.budget]
    filters = FactFilter(
        tuple(options.types) if options.types else None,
        tuple(options.tags) if options.tags else None,
        options.tags_match,
        as_of=options.as_of,
    )
    # The share of the query's terms that name its window: it weighs the temporal arm in
    # fusion, and says how little topic the temporal arm has to filter the window's facts by.
    share = (
        fusion.time_share(query, time_words, settings.keyword_cjk_terms)
        if "temporal" in options.arms and window is not None
        else 0.0
    )
    # The people (contexts) the query names, for the speaker boost, and so taken out of the
    # text its vector is made from (scoring.without_names).
    named = (
        scoring.named_contexts(
            query, store.facts.contexts_among(bank_id, scoring.query_spans(query))
        )
        if options.boosts
        else frozenset()
    )
    vector_query = (
        scoring.without_names(query, named) if named and settings.unnamed_query_share > 0 else query
    )
    ctx = ArmContext(
        store,
        bank_id,
        query,
        None,
        window,
        limit,
        filters,
        settings,
        now,
        said_instants(window),
        share,
    )
    wanted = set(options.arms)
    arms: dict[str, ArmResult] = {}
    facts: dict[int, Fact] = {}  # the candidates' facts, read as soon as an arm names them

    def timed(fn, *args) -> ArmResult:
        t0 = time.perf_counter()
        out = fn(*args)
        out.seconds = time.perf_counter() - t0
        return out

    needs_vector = bool(wanted & {"semantic", "graph", "temporal", "document"}) and (
        store.vectors.has_vectors()
    )
    model: Any = None
    whole_vec: Any = None  # the whole query's vector (the arms' may leave names out)
    scan: Any = None
    submitted: list[Future] = []
    try:

        def start(fn, *args, known: Container[int] = frozenset(), shared: Any = None) -> Any:
            if spread:
                future = _arm_pool().submit(
                    _on_own_connection, store, ctx, timed, fn, *args, known=known, scan=shared
                )
                submitted.append(future)
                return future
            done: Future = Future()
            done.set_result(timed(fn, ctx, *args))
            return done

        keyword_future = None
        if "keyword" in wanted:
            keyword_future = start(keyword.run)
        if needs_vector:
            # The semantic arm's scan of the bank's vectors (~25 ms at 100k facts) and of its
            # sentence vectors, read while the model may still be loading in the background
            # (models/preload.py).
            t0 = time.perf_counter()
            scan = store.vectors.prepare_vector_search(bank_id, sentences="semantic" in wanted)
            timings["vectors"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            model = (
                embedder() if callable(embedder) and not hasattr(embedder, "embed") else embedder
            )
            # Vectors of another model than the query's would rank by noise (one-line error).
            check_query_embedder(store, bank_id, model)
            # A query is embedded with the model's query rules (e5: "query: "), stored text
            # with its passage rules; a plain embed() callable has only the one.
            embed_query = getattr(model, "embed_query", None) or (lambda t: model.embed([t])[0])
            whole_vec = ctx.query_vec = embed_query(query)
            if vector_query != query:
                # The arms search by the whole query's vector and the one without the names
                # it gives, averaged (scoring.without_names says why); the floor keeps the
                # whole query's, on which it was calibrated.
                # (Not `share`: that name holds the query's time share, used by fusion below.)
                part = settings.unnamed_query_share
                mixed = part * embed_query(vector_query) + (1.0 - part) * whole_vec
                ctx.query_vec = mixed / (float(np.linalg.norm(mixed)) or 1.0)
            timings["embed"] = time.perf_counter() - t0
        # A question about a time: the temporal arm runs beside the semantic arm, on a
        # second connection that searches with this one's scan of the bank's vectors (read
        # again there, it cost ~25 ms at 100k facts in every new process).
        temporal_future = None
        if "temporal" in wanted:
            if window is not None and ctx.query_vec is not None:
                # Its hits' facts are read at its end, but those the main thread holds by
                # then (the keyword and semantic hits': a window's facts nearest the query
                # are often among them): `facts` is looked at then, not now.
                temporal_future = start(temporal.run, known=facts, shared=scan)
            else:
                arms["temporal"] = timed(temporal.run, ctx)
        # The graph and document arms expand the semantic hits, so semantic runs whenever
        # one of them is wanted.
        sem = timed(semantic.run, ctx) if wanted & {"semantic", "graph", "document"} else None
        if "semantic" in wanted:
            arms["semantic"] = sem
        # The graph arm reads only links and entities, on a connection of its own.
        # The keyword arm, done by now more often than not, has read its hits' facts: the
        # semantic and graph hits among them are not read again.
        if keyword_future is not None and keyword_future.done():
            facts.update(keyword_future.result().facts)
        graph_future = None
        if "graph" in wanted:
            # Its hits' facts are read on its connection, but for the semantic hits: the
            # main thread reads those meanwhile.
            known = frozenset(facts).union(h.fact_id for h in sem.hits)
            graph_future = start(graph.run, sem, known=known)
        if "document" in wanted:
            # On this connection, beside the graph arm: it reads the seeds' neighbours and
            # their vectors, most of which the semantic arm has just read.
            arms["document"] = timed(document.run, ctx, sem)
        if spread and "semantic" in arms:
            # The semantic hits' facts are read while the other arms run beside.
            t0 = time.perf_counter()
            _read_facts(store, bank_id, facts, (h.fact_id for h in sem.hits))
            timings["facts"] = time.perf_counter() - t0
        if keyword_future is not None:
            arms["keyword"] = keyword_future.result()
        if temporal_future is not None:
            arms["temporal"] = temporal_future.result()
        if graph_future is not None:
            arms["graph"] = graph_future.result()
    finally:
        # No arm outlives its recall, even one that failed: their connections go back to
        # the store's pool before it can be closed.
        wait(submitted)
    arms = {name: arms[name] for name in ARMS if name in arms}
    for name, arm in arms.items():
        timings[name] = arm.seconds
    timings["arms"] = time.perf_counter() - started

    t0 = time.perf_counter()
    # Arm weights for this query: an arm known to be weak for it weighs less (fusion.py).
    rules = getattr(model, "rules", None)
    # A question about a time weighs the temporal arm by how much of it is time words; RRF
    # (shown beside) keeps the reference weights.
    share = share if "temporal" in arms else 0.0
    score_weights, weights_note = fusion.query_weights(
        settings.score_weights, query, rules, settings, share
    )
    rrf_weights, _ = fusion.query_weights(settings.arm_weights, query, rules, settings)
    candidates = fusion.fuse(arms, settings.fusion, settings.rrf_k, rrf_weights, score_weights)
    for arm in arms.values():
        facts.update(arm.facts)
    _read_facts(store, bank_id, facts, [c.fact_id for c in candidates])
    candidates = [c for c in candidates if c.fact_id in facts]
    for c in candidates:
        c.fact = facts[c.fact_id]
    candidates = replies.propagate(store, candidates, settings)
    timings["fusion"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    active_reranker = reranker if options.rerank else None
    rerank.apply(
        candidates, query, active_reranker, RERANK_CAPS[options.budget], settings.synthetic
    )
    timings["rerank"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    ranked = scoring.apply(
        candidates,
        now,
        window,
        settings,
        enabled=options.boosts,
        named=named,
        asks_when=asks_when(query),
    )
    timings["scoring"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    # Nothing below the relevance floor is shown: a question passes at its question level,
    # and then its memories down to the item level (--min-score replaces it: recall/floor.py).
    applied = (
        floor.floor_for(model, settings)
        if options.min_score is None and ctx.query_vec is not None
        else None
    )
    shown = ranked
    if applied is not None:
        # A question about a time ("what did I do on March 10?") is answered by the facts of
        # that time, which its words and vector need not resemble: the temporal arm's.
        timely = (
            {h.fact_id for h in arms["temporal"].hits}
            if window is not None and "temporal" in arms
            else set()
        )
        shown = floor.apply(
            store,
            bank_id,
            query,
            whole_vec,  # the floor was calibrated on whole queries' vectors
            ranked,
            applied,
            settings.keyword_cjk_terms,
            timely=timely,
        )
    timings["floor"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    least = budget_mod.block_floor()
    results, used = budget_mod.fit(
        shown,
        options.max_tokens,
        lambda c: block_tokens(c.fact),
        options.limit,
        options.min_score,
        least,
        lambda c: block_tokens_at_least(c.fact, least - 1),
    )
    chunks = _chunks(store, results, options) if options.include_chunks else []
    timings["budget"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - started
    return RecallResult(
        query=query,
        now=now,
        budget=options.budget,
        max_tokens=options.max_tokens,
        total_tokens=used,
        reranker=getattr(active_reranker, "name", None) if active_reranker else None,
        synthetic_scores=active_reranker is None,
        time_window=window,
        results=results,
        ranked=ranked,
        arms=arms,
        timings=timings,
        chunks=chunks,
        limit=options.limit,
        min_score=options.min_score,
        floor=applied,
        passed=bool(shown) if applied is not None else None,
        notes={
            "rerank_cap": RERANK_CAPS[options.budget],
            "candidates_per_arm": limit,
            "speakers_named": sorted(named),
            "vector_query": vector_query if whole_vec is not None else query,
            "settings": settings.to_json(),
            "embedder": _embedder_note(model),
            "fusion_weights": {
                name: round((rrf_weights if settings.fusion == "rrf" else score_weights)[name], 4)
                for name in arms
            },
            "fusion_weights_reason": weights_note,
        },
    )


def said_instants(window: TimeSpan | None) -> tuple[datetime, datetime] | None:
    """A query window (a span of the user's calendar) as UTC instants: what the time a fact
    was said is compared with ("today" in Tokyo began at 15:00 UTC the day before)."""
    if window is None:
        return None
    start = window.start if window.start <= OPEN_START else local_to_utc(window.start)
    return start, local_to_utc(window.end)


def _embedder_note(model: Any) -> dict[str, Any] | None:
    """The query embedder for the trace: name, fingerprint and languages."""
    if model is None:
        return None
    rules = getattr(model, "rules", None)
    return {
        "name": getattr(model, "name", type(model).__name__),
        "fingerprint": getattr(model, "fingerprint", None),
        "languages": getattr(rules, "languages", None),
    }


# The arms beside a recall's main thread: keyword, then temporal and graph.
ARM_THREADS = 3
# Recalls in other threads of the process at once get threads of their own, up to this many
# in all: beyond it an arm would queue behind another recall's.
ARM_THREADS_MAX = 32
_pool_lock = threading.Lock()
_pool: tuple[int, ThreadPoolExecutor] | None = None


def _arm_pool() -> ThreadPoolExecutor:
    """The threads the arms run on, started once per process: a pool per recall started
    and joined its threads every query (~0.3 ms). A thread is started only when none is
    idle, so one recall at a time uses ARM_THREADS; recalls in several threads at once
    start more rather than wait for each other's arms. A forked child starts its own."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            pool = ThreadPoolExecutor(ARM_THREADS_MAX, thread_name_prefix="mem-arm")
            _pool = (os.getpid(), pool)
        return _pool[1]


def _read_facts(
    store: StoreProtocol, bank_id: int, have: dict[int, Fact], wanted: Iterable[int]
) -> None:
    """Add to `have` the bank's facts among `wanted` that it lacks."""
    missing = list(dict.fromkeys(f for f in wanted if f not in have))
    if missing:
        have.update(store.facts.facts_by_id(missing, bank_id))


def _on_own_connection(
    store: StoreProtocol,
    ctx: ArmContext,
    timed,
    fn,
    *args,
    known: Container[int] = frozenset(),
    scan: Any = None,
) -> ArmResult:
    """Run an arm on a second connection so it does not queue behind the main one, then
    read its hits' facts there too (but those in `known` when the arm is done, which the
    main thread reads or holds).
    `scan`: the main connection's scan of the bank's vectors, for the arm to search with."""
    try:
        reader = store.reader()
    except StoreError:
        return timed(fn, ctx, *args)
    try:
        if scan is not None:
            reader.vectors.search_with(ctx.bank_id, scan)
        own = dataclasses.replace(ctx, store=reader)
        result = timed(fn, own, *args)
        unread = [h.fact_id for h in result.hits if h.fact_id not in known]
        result.facts = reader.facts.facts_by_id(unread, ctx.bank_id)
        return result
    finally:
        if scan is not None:
            reader.vectors.search_with(ctx.bank_id, None)
        reader.close()


def _chunks(store: StoreProtocol, results, options: RecallOptions) -> list[dict]:
    order: list[int] = []
    for c in results:
        if c.fact.chunk_id is not None and c.fact.chunk_id not in order:
            order.append(c.fact.chunk_id)
    texts = store.documents.chunk_texts(order)
    fitted = budget_mod.fit_texts(
        [texts[i] for i in order if i in texts],
        options.max_chunk_tokens,
        tokens.count_tokens,
        tokens.truncate_to_tokens,
    )
    ids = [i for i in order if i in texts]
    return [
        {"chunk_id": i, "text": t, "tokens": tokens.count_tokens(t)} for i, t in zip(ids, fitted)
    ]


def check_query_embedder(store: StoreProtocol, bank_id: int, embedder: Any) -> None:
    """Raise StoreError when the bank's vectors come from another model than the one that
    would embed the query (cosines between two models' vectors mean nothing)."""
    from memcli.store.vectors import same_model_name

    have_name, have_fp = store.vectors.bank_embedder(bank_id)
    name = getattr(embedder, "name", None) or "?"
    fingerprint = getattr(embedder, "fingerprint", None)
    if have_fp is not None and fingerprint is not None:
        same = have_fp == fingerprint
    else:
        same = have_name is None or same_model_name(have_name, name)
    if same or not store.vectors.bank_has_vectors(bank_id):
        return
    bank = store.banks.bank_row(bank_id)["name"]
    theirs = f"{have_name} ({have_fp[:12]})" if have_fp else f"{have_name}"
    ours = f"{name} ({fingerprint[:12]})" if fingerprint else name
    raise StoreError(
        f"bank {bank!r} was embedded with {theirs} but the query would be embedded with "
        f"{ours}: give the bank's model as the {{embedder}}, or re-embed the bank with "
        f"{name} (`mem --bank {bank} reembed`)"
    )
