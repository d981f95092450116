"""Recall latency of a big store on each backend, built without the hour of embedding.

    python bench/backend_scale.py --store /tmp/big.db --size 100000
    python bench/backend_scale.py --store 'postgresql://...' --size 100000

The store is grown (or topped up to --size) with the real sentences bench/scale.py uses
(LongMemEval oracle's turns, session by session, with their speakers and dates), through the
real retain pipeline (entities, dates, links, documents), but each fact's vector is a random
unit vector drawn from a hash of its text: the same vectors on both backends, and a retain
whose embedder costs nothing, so its rate is the store's own ceiling (items/s). The bank
records the real MiniLM's name and fingerprint, so `mem recall` loads MiniLM for the query.

Then, with the real embedder for queries (LongMemEval questions, at their dates):
- warm recall: one process, one connection, each query asked once untimed then timed:
  p50 / p95 ms (for PostgreSQL, over the server's local socket);
- cold recall: a whole `mem --db STORE recall QUERY` process per query: p50 / p95 s.
The semantic arm ranks random vectors, so what it finds means nothing; its cost does not
depend on that (bench/scale.py measures quality-bearing figures at the sizes it can embed).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import DATASET, load_queries, load_sentences, percentile  # noqa: E402


class HashedVectors:
    """An embedder whose vectors are random unit vectors seeded by each text, under the real
    model's name and fingerprint."""

    def __init__(self, real) -> None:  # noqa: ANN001 - memcli's Embedder
        self.name = real.name
        self.fingerprint = getattr(real, "fingerprint", None)
        self.dim = real.dim

    def embed(self, texts):  # noqa: ANN001, ANN201
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


def grow(store_location: str, size: int, embedder) -> tuple[int, float]:  # noqa: ANN001
    """Top the store up to `size` facts; (items retained now, seconds)."""
    from memcli.ingest import item_from_json
    from memcli.retain import Retainer
    from memcli.store.location import open_store, shown

    items = load_sentences(DATASET)
    fake = HashedVectors(embedder)
    with open_store(store_location) as store:
        bank = store.banks.bank_id("default")
        have = store.facts.fact_count(bank) if bank is not None else 0
        if have >= size:
            return 0, 0.0
        if have:
            raise SystemExit(f"{shown(store_location)} holds {have} facts: give an empty store")
        # Whole sessions: a session is a document, and retaining part of it again later
        # would replace the part before.
        end = size
        while 0 < end < len(items) and items[end]["document_id"] == items[end - 1]["document_id"]:
            end += 1
        todo = items[:end]
        started = time.perf_counter()
        start = 0
        while start < len(todo):
            stop = min(len(todo), start + 2000)
            while stop < len(todo) and todo[stop]["document_id"] == todo[stop - 1]["document_id"]:
                stop += 1
            part = [item_from_json(obj, {}) for obj in todo[start:stop]]
            Retainer(store, "default", fake, now=datetime(2026, 1, 1)).retain(part)
            print(
                f"  {stop} items, {time.perf_counter() - started:.0f} s",
                file=sys.stderr,
                flush=True,
            )
            start = stop
        return len(todo), time.perf_counter() - started


def warm(store_location: str, queries, embedder) -> list[float]:  # noqa: ANN001
    from memcli.recall.pipeline import recall
    from memcli.recall.types import RecallOptions
    from memcli.store.location import open_store

    times = []
    with open_store(store_location, create=False) as store:
        for query, now in queries:
            recall(
                store,
                "default",
                query,
                RecallOptions(now=datetime.fromisoformat(now)),
                embedder=embedder,
            )
        for query, now in queries:
            opts = RecallOptions(now=datetime.fromisoformat(now))
            t0 = time.perf_counter()
            recall(store, "default", query, opts, embedder=embedder)
            times.append((time.perf_counter() - t0) * 1000)
    return times


def cold(store_location: str, queries) -> list[float]:  # noqa: ANN001
    times = []
    for query, now in queries:
        cmd = [
            sys.executable,
            "-m",
            "memcli",
            "--db",
            store_location,
            "recall",
            query,
            "--now",
            now,
        ]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="a SQLite path or a postgresql:// URL")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--cold", type=int, default=15, help="cold recall processes")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    import os

    from memcli.models.load import load_embedder
    from memcli.store.location import open_store, shown

    os.environ.setdefault("TZ", "UTC")
    embedder = load_embedder()
    retained, seconds = grow(args.store, args.size, embedder)
    with open_store(args.store, create=False) as store:
        facts = store.facts.fact_count()
        links = store.links.link_count()
    queries = load_queries(DATASET, args.queries, random.Random(args.seed))
    w = warm(args.store, queries, embedder)
    c = cold(args.store, queries[: args.cold])
    print(f"store: {shown(args.store)}; {facts} facts, {links} links; load {os.getloadavg()}")
    if retained:
        rate = retained / seconds
        print(f"retain (vectors free): {retained} items in {seconds:.0f} s = {rate:.1f} items/s")
    w50, w95 = statistics.median(w), percentile(w, 0.95)
    print(f"warm recall: p50 {w50:.1f} ms, p95 {w95:.1f} ms ({len(w)} queries)")
    c50, c95 = statistics.median(c), percentile(c, 0.95)
    print(f"cold mem recall: p50 {c50:.2f} s, p95 {c95:.2f} s ({len(c)} processes)")


if __name__ == "__main__":
    main()
