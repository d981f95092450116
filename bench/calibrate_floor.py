"""Calibrate the relevance floor (recall/floor.py) on the dev sets' unanswerable questions.

    python bench/calibrate_floor.py --stores /tmp/mem-stores [--sets locomo,lme,cjk,cjk-chat]
                                    [--embedder e5] [--keep 0.97]

Over kept stores (`mem bench --stores`, one folder per set as bench/fit_fusion.py lays them
out), each question is recalled with no floor. For an answerable question, its best gold
item is the best-ranked candidate that is gold (LongMemEval: of a gold session); for an
unanswerable one (LoCoMo category 5, LongMemEval `_abs`, the CJK chat set's), every
candidate the floor would check. Each gets its cosine to the query and the share of the
query's terms its own words hold. Then, for each keyword coverage floor, the highest cosine
floor that keeps `--keep` of the answerable questions' best gold items (pooled over the
sets), and how many unanswerable questions it leaves with nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit_fusion import DEV_SETS, load_models  # noqa: E402


def measure(s, stores: Path, model) -> list[dict]:
    """Per question: (cosine, coverage) of the best gold item, or of every checked candidate
    of an unanswerable question."""
    from memcli.bench.datasets import iter_dataset
    from memcli.bench.runner import (
        BANK,
        BenchOptions,
        _case_now,
        _kept_store_path,
        _kept_store_ready,
    )
    from memcli.recall import RecallOptions, recall
    from memcli.recall.floor import CHECKED, term_coverage
    from memcli.settings import RecallSettings
    from memcli.store import Store

    settings = RecallSettings(floor_cosine=0.0)
    options = BenchOptions(dataset=str(s.path), format=s.format, stores=str(stores / s.name))
    out: list[dict] = []
    for index, case in enumerate(iter_dataset(s.path, s.format)):
        path = _kept_store_path(stores / s.name, options, index, case, model)
        if not _kept_store_ready(path):
            raise SystemExit(f"{s.name}: no kept store for case {case.id} (run mem bench --stores)")
        store = Store(path)
        try:
            bank = store.banks.require_bank(BANK)
            source_of = store.facts.source_ids(bank)
            session_of = {i.id: i.session_id for i in case.items}
            now = _case_now(case)
            for q in case.questions:
                if not (q.unanswerable or q.gold_ids or q.gold_sessions):
                    continue
                result = recall(
                    store,
                    BANK,
                    q.query,
                    RecallOptions(now=q.now or now, rerank=False),
                    embedder=model,
                    settings=settings,
                )
                head = result.ranked[:CHECKED]
                if q.unanswerable:
                    picked = head
                else:
                    by_session = s.level == "session"
                    picked = [c for c in head if _is_gold(c, q, source_of, session_of, by_session)][
                        :1
                    ]
                ids = [c.fact_id for c in picked]
                vectors = store.vectors.fact_vectors(bank, ids) if ids else None
                qv = model.embed_query(q.query)
                cos = (vectors @ qv).tolist() if vectors is not None else []
                cov = term_coverage(store, q.query, ids)
                out.append(
                    {
                        "set": s.name,
                        "id": q.id,
                        "unanswerable": q.unanswerable,
                        "cands": [
                            [round(a, 4), round(cov.get(f, 0.0), 4)] for a, f in zip(cos, ids)
                        ],
                    }
                )
        finally:
            store.close()
    return out


def _is_gold(
    candidate, question, source_of: dict, session_of: dict, by_session: bool = False
) -> bool:
    """Gold items of the question (LongMemEval, scored by session: facts of a gold session)."""
    source = source_of.get(candidate.fact_id)
    if question.gold_ids and not by_session:
        return source in question.gold_ids
    return session_of.get(source) in question.gold_sessions


def passes(cands: list, cos_floor: float, cov_floor: float) -> bool:
    return any(c >= cos_floor or v >= cov_floor for c, v in cands)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=Path, required=True)
    parser.add_argument("--sets", default="locomo,lme,cjk,cjk-chat")
    parser.add_argument("--embedder", default=os.environ.get("MEM_EMBEDDER") or None)
    parser.add_argument("--keep", type=float, default=0.97)
    parser.add_argument("--out", type=Path, help="per-question rows (JSONL)")
    args = parser.parse_args()
    os.environ["TZ"] = "UTC"
    sets = [DEV_SETS[n] for n in args.sets.split(",")]
    models = load_models(sets, args.embedder)
    rows = [r for s in sets for r in measure(s, args.stores, models[s.name])]
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    answerable = [r for r in rows if not r["unanswerable"]]
    found = [r for r in answerable if r["cands"]]
    unanswerable = [r for r in rows if r["unanswerable"]]
    print(
        f"answerable {len(answerable)} (best gold among the checked candidates: {len(found)}), "
        f"unanswerable {len(unanswerable)}"
    )
    grid = sorted({c for r in found for c, _ in r["cands"]})
    for cov_floor in (0.5, 0.75, 1.0, 2.0):
        best = None
        for cos_floor in grid:
            kept = np.mean([passes(r["cands"], cos_floor, cov_floor) for r in found])
            if kept >= args.keep:
                best = cos_floor
        if best is None:
            print(f"coverage {cov_floor}: no cosine floor keeps {args.keep:.0%}")
            continue
        line = [f"coverage floor {cov_floor:g}, cosine floor {best:.4f}:"]
        for s in sets:
            a = [r for r in found if r["set"] == s.name]
            u = [r for r in unanswerable if r["set"] == s.name]
            kept = np.mean([passes(r["cands"], best, cov_floor) for r in a]) if a else float("nan")
            empty = (
                np.mean([not passes(r["cands"], best, cov_floor) for r in u]) if u else float("nan")
            )
            line.append(f"{s.name} kept {kept:.3f} empty {empty:.2f} ({len(u)})")
        all_kept = np.mean([passes(r["cands"], best, cov_floor) for r in found])
        all_empty = np.mean([not passes(r["cands"], best, cov_floor) for r in unanswerable])
        line.append(f"all kept {all_kept:.3f} empty {all_empty:.2f}")
        print("  ".join(line))


if __name__ == "__main__":
    main()
