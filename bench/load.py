"""Load: writer and reader processes against one store at once, then an exact count check.

    python bench/load.py --store 'postgresql://...' [--writers 8] [--readers 8] [--seconds 120]
    python bench/load.py --store /tmp/load.db ...          # the same run on SQLite

Every process opens the store itself (as `mem` processes on several machines would) and
loops until the time is up:
- a writer retains notes of its own ("W3 note 17 ..."), and in turn corrects one of its
  live notes (the correction replaces it), forgets one, and retains its document again
  (three lines of a new version, which replaces the old one whole); it keeps a ledger of
  what should be there;
- a reader recalls (four arms, no reranker) questions about the notes.
Afterwards one connection checks the store against the ledgers: every note a writer was told
is stored is there once and valid, every corrected one is closed by its correction, every
forgotten one is gone, each document holds one whole version, no staging bank is left, and
every fact has its keyword row and vector. Errors are counted by kind; a documented one is a
StoreBusy (a writer waited past MEM_BUSY_TIMEOUT_MS), anything else is a failure.

Prints calls/s and p50/p95 latency per operation, and the check's figures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BANK = "load"
START = datetime(2026, 1, 1)
TOPICS = ["the garden", "a trip to Porto", "the new bike", "piano lessons", "the kitchen",
          "a book about rivers", "the cat's vet visit", "a running plan", "tax papers",
          "the camera lens"]  # fmt: skip
QUESTIONS = [f"What did I say about {t}?" for t in TOPICS] + [
    "What happened last week?",
    "Which notes mention Porto?",
    "What is the running plan?",
]


def _now(i: int) -> datetime:
    return START + timedelta(minutes=i)


def writer(url: str, who: int, deadline: float, out: str, seed: int) -> None:
    from memcli import lifecycle
    from memcli.models.load import load_embedder
    from memcli.retain import Retainer, RetainItem
    from memcli.store import StoreBusy, StoreError
    from memcli.store.location import open_store

    rng = random.Random(seed)
    embedder = load_embedder()
    calls: list[tuple[str, float, str]] = []
    live: dict[str, int] = {}  # text -> fact id, as the writer was told
    # old fact id -> (its text, the fact that closed it): forgetting that fact reopens it
    closed_by: dict[int, tuple[str, int]] = {}
    forgotten: list[int] = []
    doc_version = None
    i = 0
    with open_store(url) as store:
        while time.monotonic() < deadline:
            i += 1
            op = "retain"
            if live and i % 5 == 0:
                op = "correct"
            elif live and i % 7 == 0:
                op = "forget"
            elif i % 4 == 0:
                op = "document"
            started = time.perf_counter()
            outcome = "ok"
            try:
                retainer = Retainer(store, BANK, embedder, now=_now(i))
                if op == "retain":
                    text = f"W{who} note {i} about {rng.choice(TOPICS)}."
                    retainer.keep_stored = True
                    summary = retainer.retain([RetainItem(text=text, timestamp=_now(i))])
                    live[text] = summary.stored[0]["id"]
                elif op == "correct":
                    text, fid = rng.choice(sorted(live.items()))
                    old = lifecycle.current_fact(store, BANK, fid)
                    new_text = f"W{who} note {i} corrects {fid}: {rng.choice(TOPICS)}."
                    items = lifecycle.as_corrections(
                        store, old, [lifecycle.correction_item(store, old, new_text)]
                    )
                    _, new_ids = lifecycle.retain_superseding(store, old, retainer, items)
                    del live[text]
                    closed_by[fid] = (text, new_ids[0])
                    live[new_text] = new_ids[0]
                elif op == "forget":
                    text, fid = rng.choice(sorted(live.items()))
                    sel = lifecycle.Selection(ids=[fid])
                    plan = lifecycle.plan_forget(store, BANK, sel, embedder=None)
                    lifecycle.forget(store, plan)
                    del live[text]
                    forgotten.append(fid)
                    # Taking a correction back makes what it corrected valid again.
                    for old, (old_text, closer) in list(closed_by.items()):
                        if closer == fid:
                            del closed_by[old]
                            live[old_text] = old
                            break
                else:
                    version = f"v{i}"
                    lines = [f"W{who} doc {version} line {j}." for j in range(3)]
                    retainer.retain([RetainItem(text=t, document_id=f"d{who}") for t in lines])
                    doc_version = version
            except StoreBusy:
                outcome = "busy"
            except (StoreError, lifecycle.LifecycleError) as exc:
                outcome = f"error: {exc}"
            calls.append((op, (time.perf_counter() - started) * 1000, outcome))
    Path(out).write_text(
        json.dumps(
            {
                "calls": calls,
                "live": live,
                "closed_by": {str(k): v[1] for k, v in closed_by.items()},
                "forgotten": forgotten,
                "doc_version": doc_version,
            }
        )
    )


def reader(url: str, who: int, deadline: float, out: str, seed: int) -> None:
    from memcli.models.load import load_embedder
    from memcli.recall.pipeline import recall
    from memcli.recall.types import RecallOptions
    from memcli.store import StoreError
    from memcli.store.location import open_store

    rng = random.Random(seed)
    embedder = load_embedder()
    calls: list[tuple[str, float, str]] = []
    with open_store(url) as store:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            outcome = "ok"
            try:
                if store.banks.bank_id(BANK) is not None:
                    recall(
                        store,
                        BANK,
                        rng.choice(QUESTIONS),
                        RecallOptions(now=_now(10_000)),
                        embedder=embedder,
                    )
            except StoreError as exc:
                outcome = f"error: {exc}"
            calls.append(("recall", (time.perf_counter() - started) * 1000, outcome))
    Path(out).write_text(json.dumps({"calls": calls}))


def check(url: str, ledgers: list[dict]) -> dict:
    """The store against the writers' ledgers (see the module docstring)."""
    from memcli.store.location import open_store

    problems: list[str] = []
    with open_store(url, create=False) as store:
        bank = store.banks.require_bank(BANK)
        facts = store.facts.facts_by_id(store.facts.fact_ids_of_bank(bank))
        by_text: dict[str, list] = {}
        for fact in facts.values():
            by_text.setdefault(fact.text, []).append(fact)
        expected_live = 0
        for who, ledger in enumerate(ledgers):
            for text, fid in ledger["live"].items():
                expected_live += 1
                found = by_text.get(text, [])
                if len(found) != 1:
                    problems.append(f"W{who}: {text!r} stored {len(found)} times")
                elif found[0].id != fid or found[0].invalid_at is not None:
                    problems.append(f"W{who}: {text!r} is not the valid fact {fid}")
            for old, closer in ledger["closed_by"].items():
                fact = facts.get(int(old))
                if fact is None or fact.invalid_at is None or fact.superseded_by != closer:
                    problems.append(f"W{who}: fact {old} is not closed by {closer}")
            for fid in ledger["forgotten"]:
                if fid in facts:
                    problems.append(f"W{who}: forgotten fact {fid} is still there")
            docs = [f for f in facts.values() if f.document_id == f"d{who}"]
            versions = {f.text.split(" line ")[0] for f in docs}
            if ledger["doc_version"] is None:
                if docs:
                    problems.append(f"W{who}: a document that was never retained")
            elif len(docs) != 3 or versions != {f"W{who} doc {ledger['doc_version']}"}:
                problems.append(f"W{who}: document holds {sorted(versions)} ({len(docs)} lines)")
        notes = [f for f in facts.values() if f.document_id is None and f.invalid_at is None]
        extra = len(notes) - expected_live - len(TOPICS)  # the seed notes
        if extra:
            problems.append(f"{extra} valid notes no writer was told were stored")
        counts = store.health.index_counts()
        if not counts["facts"] == counts["fts_rows"] == counts["vectors"]:
            problems.append(f"index counts differ: {counts}")
        ids = list(facts)
        if len(ids) != len(set(ids)):
            problems.append("a fact id given twice")
        staging = len(store.banks.bank_names()) != 1
        if staging:
            problems.append(f"banks: {store.banks.bank_names()}")
        quick = store.health.quick_check()
        if quick != ["ok"]:
            problems.extend(quick)
    return {"facts": len(facts), "expected_live_notes": expected_live, "problems": problems}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="a postgresql:// URL or a SQLite path")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    from memcli.models.load import load_embedder
    from memcli.retain import Retainer, RetainItem
    from memcli.store.location import open_store, shown

    os.environ.setdefault("TZ", "UTC")
    with open_store(args.store) as store:  # the store and its bank, with a few notes
        Retainer(store, BANK, load_embedder(), now=START).retain(
            [RetainItem(text=f"Seed note about {t}.", timestamp=START) for t in TOPICS]
        )
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"mem-load-{os.getpid()}"
    folder.mkdir(exist_ok=True)
    ctx = mp.get_context("spawn")
    # Every process loads its model first; the clock starts for all once they have had time.
    deadline = time.monotonic() + 20 + args.seconds
    procs = []
    for role, count, seed in ((writer, args.writers, 0), (reader, args.readers, 100)):
        for n in range(count):
            out = folder / f"{role.__name__}{n}.json"
            job = (args.store, n, deadline, str(out), args.seed + seed + n)
            procs.append((out, ctx.Process(target=role, args=job)))
    started = time.monotonic()
    for _, p in procs:
        p.start()
    for _, p in procs:
        p.join()
    wall = time.monotonic() - started
    results = [json.loads(out.read_text()) for out, p in procs if p.exitcode == 0]
    crashed = sum(1 for _, p in procs if p.exitcode != 0)
    ledgers = results[: args.writers]
    calls = [c for r in results for c in r["calls"]]
    print(f"store: {shown(args.store)}")
    print(f"{args.writers} writers, {args.readers} readers, {args.seconds:g} s (+ model load); "
          f"wall {wall:.0f} s; processes that crashed: {crashed}")  # fmt: skip
    for op in ("retain", "correct", "forget", "document", "recall"):
        ms = [c[1] for c in calls if c[0] == op and c[2] == "ok"]
        errors = [c[2] for c in calls if c[0] == op and c[2] != "ok"]
        busy = sum(1 for e in errors if e == "busy")
        if not ms and not errors:
            continue
        print(
            f"  {op:9s} {len(ms):6d} ok  {len(ms) / args.seconds:7.2f}/s  "
            f"p50 {statistics.median(ms) if ms else 0:7.1f} ms  p95 {percentile(ms, 0.95):7.1f} ms"
            f"  busy {busy}  errors {len(errors) - busy}"
        )  # fmt: skip
        for e in sorted({e for e in errors if e != "busy"})[:3]:
            print(f"      {e[:160]}")
    figures = check(args.store, ledgers)
    print(f"check: {figures['facts']} facts, {figures['expected_live_notes']} live notes expected; "
          f"problems: {len(figures['problems'])}")  # fmt: skip
    for problem in figures["problems"][:20]:
        print(f"  {problem}")


if __name__ == "__main__":
    main()
