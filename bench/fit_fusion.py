"""Fit recall's fusion weights on the dev sets together, with leave-one-set-out validation.

    python bench/fit_fusion.py --stores /tmp/mem-stores [--grid semantic=0.5,1,2 ...]
                               [--sets locomo,lme,cjk,cjk-chat] [--out fit.jsonl]

Every dev set is retained once into kept stores (`mem bench --stores`, the same stores a
later `mem bench --stores` reuses), then each weight setting of the grid is scored on every
set through the real recall pipeline. Only fusion and what follows it change between
settings, so each arm's list is computed once per question and reused (the arms do not
read the weights); everything else (fusion, replies, boosts, budget, the metrics) runs as
`mem bench` runs it.

The objective of a set is the mean of its two headline figures: R@10 and MRR over items
(LoCoMo, the CJK sets), R@5 and MRR over sessions (LongMemEval S). Validation: for each set,
the weights that maximise the mean objective of the OTHER sets, and what they score on the
held-out one, beside the defaults; then the one setting for all, the best mean over every
set. No set gets weights of its own.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATASETS = Path(os.environ.get("MEM_DATASETS", str(ROOT.parent / "shared" / "datasets")))


@dataclass(frozen=True)
class DevSet:
    name: str
    format: str
    path: Path
    level: str
    headline: tuple[str, str]


DEV_SETS = {
    "locomo": DevSet(
        "locomo", "locomo", DATASETS / "locomo-dev.json", "item", ("recall@10", "MRR")
    ),
    "lme": DevSet(
        "lme", "lme", DATASETS / "longmemeval-s-dev.jsonl", "session", ("recall@5", "MRR")
    ),
    "cjk": DevSet(
        "cjk", "jsonl", ROOT / "bench" / "data" / "cjk-dev.jsonl", "item", ("recall@10", "MRR")
    ),
    "cjk-chat": DevSet(
        "cjk-chat",
        "jsonl",
        ROOT / "bench" / "data" / "cjk-chat-dev.jsonl",
        "item",
        ("recall@10", "MRR"),
    ),
}


# Settings read only after the arms (fusion, replies, boosts): changing them reuses the lists.
AFTER_ARMS = {
    "score_weights",
    "arm_weights",
    "rrf_k",
    "fusion",
    "synthetic",
    "reply_share",
    "reply_max_gap_hours",
    "recency_alpha",
    "recency_horizon_days",
    "temporal_alpha",
    "proof_alpha",
    "speaker_alpha",
    "cjk_weak_embedder_factor",
    "cjk_keyword_factor",
    "time_query_temporal_weight",
}


class ArmMemo:
    """Each arm's list computed once per (store, query, time): the arms do not read the
    fusion weights, so a grid over them needs the arms only once. Patches the arm modules'
    run functions in this process."""

    def __init__(self) -> None:
        from memcli.recall import graph, keyword, semantic, temporal

        self.cache: dict[tuple, Any] = {}
        self.modules = [semantic, keyword, graph, temporal]
        try:
            from memcli.recall import document

            self.modules.append(document)
        except ImportError:
            pass
        for module in self.modules:
            module.run = self._wrap(module.__name__, module.run)

    def _wrap(self, name: str, run):
        def memo(ctx, *args):
            arm_settings = json.dumps(
                {k: v for k, v in ctx.settings.to_json().items() if k not in AFTER_ARMS},
                sort_keys=True,
                default=str,
            )
            key = (name, str(ctx.store.path), ctx.bank_id, ctx.query, ctx.now, ctx.limit)
            key += (arm_settings,)
            hit = self.cache.get(key)
            if hit is None:
                hit = self.cache[key] = run(ctx, *args)
            return hit

        return memo


def load_models(sets: list[DevSet], embedder: str | None) -> dict[str, Any]:
    """The embedder of each set as `mem bench` picks it (MEM_EMBEDDER / --embedder, else
    mem's default for a new bank), behind the bench's vector cache; and MiniLM for LME's raw
    floor."""
    from memcli.models.choice import DEFAULT_NAME
    from memcli.models.load import load_embedder
    from memcli.store.vector_cache import cached

    model = cached(load_embedder(embedder or DEFAULT_NAME))
    out: dict[str, Any] = {s.name: model for s in sets}
    out["floor"] = cached(load_embedder("minilm"))
    return out


def score(
    s: DevSet, stores: Path, models: dict[str, Any], settings: dict[str, Any], levels: bool = False
) -> dict:
    """One set under one setting: the real bench run over kept stores (`levels`: with the
    report's every level, e.g. "shown")."""
    from memcli.bench.datasets import iter_dataset
    from memcli.bench.runner import BenchOptions, default_ks, run_bench

    options = BenchOptions(
        dataset=str(s.path),
        format=s.format,
        ks=default_ks(s.format),
        rerank=False,
        settings=settings,
        stores=str(stores / s.name),
        raw_floor=False,
    )
    summary = run_bench(iter_dataset(s.path, s.format), options, embedder=models[s.name])
    metrics = summary["levels"][s.level]["overall"]["metrics"]
    a, b = s.headline
    more = {"levels": summary["levels"]} if levels else {}
    return {
        **more,
        a: metrics[a],
        b: metrics[b],
        "objective": (metrics[a] + metrics[b]) / 2,
        "arms": {
            arm: {a: row["metrics"].get(a), b: row["metrics"].get(b)}
            for arm, row in summary["levels"][s.level]["arms"].items()
        },
    }


def parse_grid(values: list[str]) -> list[dict[str, Any]]:
    """["semantic=0.5,1", "document_radius=1,2"] -> every combination; an arm's name is its
    fusion weight, any other name a recall setting (JSON values)."""
    axes = []
    for value in values:
        name, _, numbers = value.partition("=")
        axes.append([(name.strip(), json.loads(x)) for x in numbers.split(",") if x.strip()])
    return [dict(combo) for combo in itertools.product(*axes)] if axes else [{}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=Path, required=True)
    parser.add_argument("--sets", default="locomo,lme,cjk,cjk-chat")
    parser.add_argument("--grid", action="append", default=[], help="ARM=w1,w2,... (repeat)")
    parser.add_argument("--setting", action="append", default=[], help="KEY=JSON for all runs")
    parser.add_argument("--embedder", default=os.environ.get("MEM_EMBEDDER") or None)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    os.environ["TZ"] = "UTC"  # as mem bench: the datasets' wall clock

    from memcli.settings import RecallSettings

    sets = [DEV_SETS[name] for name in args.sets.split(",")]
    fixed = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.setting)}
    models = load_models(sets, args.embedder)
    ArmMemo()
    base = dict(fixed.get("score_weights") or RecallSettings().score_weights)
    results: list[dict] = []
    out = args.out.open("a") if args.out else None
    from memcli.recall.types import ARMS

    for update in [{}] + parse_grid(args.grid):
        weights = {**base, **{k: v for k, v in update.items() if k in ARMS}}
        settings = {**fixed, **{k: v for k, v in update.items() if k not in ARMS}}
        settings["score_weights"] = weights
        row: dict[str, Any] = {"weights": weights, "update": update}
        started = time.perf_counter()
        for s in sets:
            row[s.name] = score(s, args.stores, models, settings)
        row["mean"] = sum(row[s.name]["objective"] for s in sets) / len(sets)
        row["seconds"] = round(time.perf_counter() - started, 1)
        results.append(row)
        line = "  ".join(
            f"{s.name} {row[s.name][s.headline[0]]:.3f}/{row[s.name]['MRR']:.3f}" for s in sets
        )
        print(f"{json.dumps(update)}  {line}  mean {row['mean']:.4f}", flush=True)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()
    default = results[0]
    print("\nleave one set out (weights fit on the others -> held-out objective):")
    for held in sets:
        others = [s for s in sets if s is not held]
        best = max(
            results[1:] or results,
            key=lambda r: sum(r[s.name]["objective"] for s in others) / len(others),
        )
        print(
            f"  {held.name}: fit {json.dumps(best['update'])} -> "
            f"{best[held.name]['objective']:.4f} (defaults {default[held.name]['objective']:.4f})"
        )
    overall = max(results, key=lambda r: r["mean"])
    print(f"\nbest for all: {json.dumps(overall['update'])} mean {overall['mean']:.4f}")
    for s in sets:
        print(
            f"  {s.name}: {s.headline[0]} {overall[s.name][s.headline[0]]:.3f} "
            f"MRR {overall[s.name]['MRR']:.3f} (defaults {default[s.name][s.headline[0]]:.3f} / "
            f"{default[s.name]['MRR']:.3f})"
        )
    if out:
        out.close()


if __name__ == "__main__":
    sys.exit(main())
