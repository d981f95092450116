"""Embedder speed on the same texts: raw embedding and whole retain, items/s, per model.

    python bench/embedder_speed.py [--dataset bench/data/cjk-dev.jsonl] [--runs 3]
                                   [--embedders minilm,e5] [--format locomo --items 600]

The texts are the items of a bench file (default: the CJK dev set; --format and --items for
another, e.g. the first 600 turns of LoCoMo). Each run embeds every text once (one embed()
call per 64 texts, as retain batches them) and retains them all into a fresh store in a temp
folder; the table shows the median of the runs, the model load time (first load in this
process, so the OS file cache may already hold the file), and for queries: the load a cold
`mem recall` pays (load_embedder in a new process) and the median time to embed one of the
questions.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memcli.bench.datasets import read_dataset
from memcli.models.embedder import Embedder
from memcli.models.load import load_embedder, resolve_embedder_path
from memcli.retain import Retainer, RetainItem
from memcli.store import Store

BATCH = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="bench/data/cjk-dev.jsonl")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--embedders", default="minilm,e5")
    parser.add_argument("--format", default="jsonl")
    parser.add_argument("--items", type=int, default=None, help="only the first N items")
    args = parser.parse_args()
    cases = read_dataset(args.dataset, args.format)
    items = [i for case in cases for i in case.items][: args.items]
    queries = [q.query for case in cases for q in case.questions][:30]
    texts = [i.text for i in items]
    print(f"{len(texts)} texts from {args.dataset}, median of {args.runs} runs")
    head = ("embedder", "load s", "embed items/s", "retain items/s", "ratio", "query load s")
    print(
        f"{head[0]:24} {head[1]:>7} {head[2]:>14} {head[3]:>15} {head[4]:>6} {head[5]:>12}"
        "  query ms"
    )
    for spec in args.embedders.split(","):
        t0 = time.perf_counter()
        model = Embedder(resolve_embedder_path(spec))
        load = time.perf_counter() - t0
        model.embed(["warm up"])
        embed_rates, retain_rates = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            for i in range(0, len(texts), BATCH):
                model.embed(texts[i : i + BATCH])
            embed_rates.append(len(texts) / (time.perf_counter() - t0))
            with tempfile.TemporaryDirectory() as tmp:
                store = Store(Path(tmp) / "speed.db")
                try:
                    retained = [
                        RetainItem(text=i.text, timestamp=i.timestamp, context=i.context)
                        for i in items
                    ]
                    t0 = time.perf_counter()
                    Retainer(store, "default", model).retain(retained)
                    retain_rates.append(len(items) / (time.perf_counter() - t0))
                finally:
                    store.close()
        embed, retain = statistics.median(embed_rates), statistics.median(retain_rates)
        query_model = load_embedder(spec)
        query_model.embed_query("warm up")
        query_ms = []
        for q in queries:
            t0 = time.perf_counter()
            query_model.embed_query(q)
            query_ms.append((time.perf_counter() - t0) * 1000)
        print(
            f"{model.name:24} {load:7.2f} {embed:14.1f} {retain:15.1f} {retain / embed:6.2f} "
            f"{cold_query_load(spec):12.2f}  {statistics.median(query_ms):8.1f}",
            flush=True,
        )


def cold_query_load(spec: str, runs: int = 3) -> float:
    """Seconds a new process takes to load the embedder recall would use (median of runs)."""
    code = (
        "import time; t = time.perf_counter(); "
        "from memcli.models.load import load_embedder; "
        f"load_embedder({spec!r}); print(time.perf_counter() - t)"
    )
    times = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
        for _ in range(runs)
    ]
    return statistics.median(times)


if __name__ == "__main__":
    main()
