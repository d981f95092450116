"""Speed benchmark: retain facts/s and recall latency (p50/p95) at 1k and 10k facts.

    python bench/speed.py [--sizes 1000,10000] [--queries 30] [--budget mid]

Facts are generated from templates (people, places, activities, dates over two years), so the
run needs no dataset. Each size gets a fresh database in a temp folder. Prints one table, then
the median time of each recall phase (fusion includes reply propagation; scoring includes
finding the speakers a query names).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from memcli.models.load import load_embedder
from memcli.recall import RecallOptions, recall
from memcli.retain import Retainer, RetainItem
from memcli.store import Store

PEOPLE = ["Maya", "Priya", "Tom", "Hannelore", "Kenji", "Amara", "Luis", "Sofia", "Omar", "Greta"]
PLACES = ["Lisbon", "Berlin", "Leeds", "Kyoto", "Nairobi", "Austin", "Oslo", "Porto", "Seoul"]
ACTS = [
    "went hiking near {place} with {other}",
    "started learning the cello after talking to {other}",
    "booked a flight to {place} for the conference",
    "finished reading a novel that {other} recommended",
    "cooked a curry for {other} and their kids",
    "signed up for a half marathon in {place}",
    "adopted a rescue dog from a shelter in {place}",
    "had a long call with {other} about changing jobs",
    "fixed the leaking kitchen tap before {other} arrived",
    "visited the modern art museum in {place}",
    "lost a phone on the tram in {place}",
    "planted tomatoes and basil on the balcony",
]
WHEN = ["yesterday", "last week", "this morning", "two days ago", "last weekend", ""]
QUERIES = [
    "What did {p} do in {place}?",
    "Who recommended a book?",
    "When did {p} sign up for the marathon?",
    "what happened last month?",
    "Which pets were adopted?",
    "cello lessons",
    "conference flight to {place}",
]


def make_items(n: int, rng: random.Random) -> list[RetainItem]:
    start = datetime(2024, 1, 1)
    items = []
    for i in range(n):
        who, other = rng.sample(PEOPLE, 2)
        act = rng.choice(ACTS).format(place=rng.choice(PLACES), other=other)
        text = f"{who} {act} {rng.choice(WHEN)}".strip() + f" (note {i})."
        ts = start + timedelta(minutes=int(i * 700 * 1440 / n) + rng.randint(0, 59))
        items.append(RetainItem(text=text, source_id=str(i), timestamp=ts, context=who))
    return items


def make_queries(k: int, rng: random.Random) -> list[str]:
    return [
        rng.choice(QUERIES).format(p=rng.choice(PEOPLE), place=rng.choice(PLACES)) for _ in range(k)
    ]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--budget", default="mid")
    args = parser.parse_args()
    embedder = load_embedder()
    embedder.embed(["warm up"])
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        rng = random.Random(size)
        items = make_items(size, rng)
        with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "bench.db") as store:
            t0 = time.perf_counter()
            summary = Retainer(store, "default", embedder, now=datetime(2026, 1, 1)).retain(items)
            retain_s = time.perf_counter() - t0
            now = datetime(2025, 12, 1)
            latencies = []
            phases: dict[str, list[float]] = {}
            for query in make_queries(args.queries, rng):
                t0 = time.perf_counter()
                result = recall(
                    store,
                    "default",
                    query,
                    RecallOptions(budget=args.budget, now=now),
                    embedder=embedder,
                )
                latencies.append((time.perf_counter() - t0) * 1000)
                for phase, seconds in result.timings.items():
                    phases.setdefault(phase, []).append(seconds * 1000)
        rows.append(
            (
                size,
                summary.facts,
                summary.facts / retain_s,
                statistics.median(latencies),
                percentile(latencies, 0.95),
                {phase: statistics.median(v) for phase, v in phases.items()},
            )
        )
    print(
        f"{'facts':>7} {'stored':>7} {'retain facts/s':>15} {'recall p50 ms':>14} "
        f"{'recall p95 ms':>14}   (budget {args.budget}, {args.queries} queries, no reranker)"
    )
    for size, stored, rate, p50, p95, _ in rows:
        print(f"{size:>7} {stored:>7} {rate:>15.1f} {p50:>14.1f} {p95:>14.1f}")
    for size, *_, phases in rows:
        detail = ", ".join(f"{phase} {ms:.1f}" for phase, ms in phases.items())
        print(f"{size:>7} facts, p50 ms by phase: {detail}")


if __name__ == "__main__":
    main()
