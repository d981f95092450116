"""Embedder speed on the same texts: raw embedding and whole retain, items/s, per model.

    python bench/embedder_speed.py [--dataset bench/data/cjk-dev.jsonl] [--runs 3]
                                   [--embedders minilm,e5]

The texts are the items of a generic bench JSONL file (default: the CJK dev set). Each run
embeds every text once (one embed() call per 64 texts, as retain batches them) and retains
them all into a fresh store in a temp folder; the table shows the median of the runs, and the
model load time (first load in this process, so the OS file cache may already hold the file).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from memcli.bench.datasets import read_dataset
from memcli.models.embedder import Embedder, resolve_embedder_path
from memcli.retain import Retainer, RetainItem
from memcli.store import Store

BATCH = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="bench/data/cjk-dev.jsonl")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--embedders", default="minilm,e5")
    args = parser.parse_args()
    items = [i for case in read_dataset(args.dataset, "jsonl") for i in case.items]
    texts = [i.text for i in items]
    print(f"{len(texts)} texts from {args.dataset}, median of {args.runs} runs")
    head = ("embedder", "load s", "embed items/s", "retain items/s", "ratio")
    print(f"{head[0]:24} {head[1]:>7} {head[2]:>14} {head[3]:>15} {head[4]:>6}")
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
        print(
            f"{model.name:24} {load:7.2f} {embed:14.1f} {retain:15.1f} {retain / embed:6.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
