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

`--gates G1,G2,... --items F1,F2,...` measures the floor in two levels instead: a question
passes when one of its checked candidates reaches the gate G (by cosine, or its words hold
the query's terms, or the temporal arm found it in the time asked about), and then every
candidate that reaches the item floor F is shown (the setting floor_item_share = F / G).
For each pair: the share of answerable questions that keep their best gold item, per set;
the dev sets' unanswerable questions emptied; and the "never said" questions emptied:
`--never-said N` asks each store N questions of another dev set in its language (LoCoMo's
of LongMemEval's stores and back, about nothing it holds; the CJK sets' of each other's,
which share people and topics, so many of those are answerable).
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

# The dev sets whose questions are asked of a set's stores as "never said" (same language).
NEVER_SAID_FROM = {"locomo": "lme", "lme": "locomo", "cjk": "cjk-chat", "cjk-chat": "cjk"}


def questions_of(s, n: int, seed: int) -> list[str]:
    """n questions of a dev set, answerable or not, chosen with a fixed seed."""
    import random

    from memcli.bench.datasets import iter_dataset

    pool = [q.query for case in iter_dataset(s.path, s.format) for q in case.questions]
    return random.Random(seed).sample(pool, min(n, len(pool)))


def measure(s, stores: Path, model, never_said: list[str] = ()) -> list[dict]:
    """Per question: (cosine, coverage, timely) of the best gold item, or of every checked
    candidate of an unanswerable question; and of every checked candidate ("head") for the
    question-level gate. never_said: questions asked of every store of the set besides its
    own (rows with "never_said" true)."""
    from memcli.bench.datasets import iter_dataset
    from memcli.bench.runner import (
        BANK,
        BenchOptions,
        _case_now,
        _kept_store_path,
        _kept_store_ready,
    )
    from memcli.recall import RecallOptions, recall
    from memcli.recall.floor import CHECKED
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
            own = [q for q in case.questions if q.unanswerable or q.gold_ids or q.gold_sessions]
            asked = own + [None] * len(never_said)
            for number, q in enumerate(asked):
                query = q.query if q is not None else never_said[number - len(own)]
                result = recall(
                    store,
                    BANK,
                    query,
                    RecallOptions(now=(q.now if q else None) or now, rerank=False),
                    embedder=model,
                    settings=settings,
                )
                head = result.ranked[:CHECKED]
                timely = (
                    {h.fact_id for h in result.arms["temporal"].hits}
                    if result.time_window is not None and "temporal" in result.arms
                    else set()
                )
                if q is None or q.unanswerable:
                    picked = head
                else:
                    by_session = s.level == "session"
                    picked = [c for c in head if _is_gold(c, q, source_of, session_of, by_session)][
                        :1
                    ]

                out.append(
                    {
                        "set": s.name,
                        "id": q.id if q else f"never-said:{number}",
                        "unanswerable": q is None or q.unanswerable,
                        "never_said": q is None,
                        "cands": _inputs(store, bank, model, query, picked, timely),
                        "head": (
                            _inputs(store, bank, model, query, head, timely)
                            if q is not None and not q.unanswerable
                            else None
                        ),
                    }
                )
        finally:
            store.close()
    return out


def _inputs(store, bank: int, model, query: str, chosen, timely: set[int]) -> list[list[float]]:
    """(cosine to the whole query, share of its terms held, found in its time) per candidate."""
    from memcli.recall.floor import term_coverage

    ids = [c.fact_id for c in chosen]
    vectors = store.vectors.fact_vectors(bank, ids) if ids else None
    qv = model.embed_query(query)
    cos = (vectors @ qv).tolist() if vectors is not None else []
    cov = term_coverage(store, query, ids)
    return [[round(a, 4), round(cov.get(f, 0.0), 4), int(f in timely)] for a, f in zip(cos, ids)]


def _is_gold(
    candidate, question, source_of: dict, session_of: dict, by_session: bool = False
) -> bool:
    """Gold items of the question (LongMemEval, scored by session: facts of a gold session)."""
    source = source_of.get(candidate.fact_id)
    if question.gold_ids and not by_session:
        return source in question.gold_ids
    return session_of.get(source) in question.gold_sessions


def passes(cands: list, cos_floor: float, cov_floor: float) -> bool:
    return any(c >= cos_floor or v >= cov_floor or t for c, v, t in cands)


def gate_table(rows: list[dict], sets, gates: list[float], items: list[float]) -> None:
    """Each (gate, item floor): answerable best gold kept per set, unanswerable and never
    said questions emptied (keyword coverage floor 1, as recall uses)."""
    print(f"{'gate':>5} {'item':>5}  " + "  ".join(f"{s.name:>22}" for s in sets) + "   all kept")
    for gate in gates:
        for item in items:
            cells, kept_all = [], []
            for s in sets:
                a = [r for r in rows if r["set"] == s.name and not r["unanswerable"]]
                kept = [
                    bool(r["cands"])
                    and passes(r["head"], gate, 1.0)
                    and passes(r["cands"], item, 1.0)
                    for r in a
                ]
                kept_all += kept
                u = [r for r in rows if r["set"] == s.name and r["unanswerable"]]
                dev = [not passes(r["cands"], gate, 1.0) for r in u if not r["never_said"]]
                never = [not passes(r["cands"], gate, 1.0) for r in u if r["never_said"]]
                cells.append(f"{np.mean(kept):.3f} {_share(dev)} {_share(never)}")
            print(
                f"{gate:>5} {item:>5}  "
                + "  ".join(f"{c:>22}" for c in cells)
                + f"   {np.mean(kept_all):.3f}"
            )
    print("cell: answerable best gold kept, dev unanswerable emptied, never said emptied")


def _share(flags: list[bool]) -> str:
    return f"{np.mean(flags):.2f}" if flags else "   -"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=Path, required=True)
    parser.add_argument("--sets", default="locomo,lme,cjk,cjk-chat")
    parser.add_argument("--embedder", default=os.environ.get("MEM_EMBEDDER") or None)
    parser.add_argument("--keep", type=float, default=0.97)
    parser.add_argument("--out", type=Path, help="per-question rows (JSONL)")
    parser.add_argument("--gates", help="question gates to measure, e.g. 0.366,0.40")
    parser.add_argument("--items", help="item floors to measure with each gate")
    parser.add_argument(
        "--never-said", type=int, default=0, help="questions a store, of another set"
    )
    parser.add_argument("--rows", type=Path, help="read the rows of an earlier --out instead")
    args = parser.parse_args()
    os.environ["TZ"] = "UTC"
    sets = [DEV_SETS[n] for n in args.sets.split(",")]
    if args.rows:
        rows = [json.loads(line) for line in args.rows.read_text().splitlines()]
    else:
        models = load_models(sets, args.embedder)
        rows = []
        for s in sets:
            other = DEV_SETS[NEVER_SAID_FROM[s.name]]
            never = questions_of(other, args.never_said, seed=7) if args.never_said else []
            rows += measure(s, args.stores, models[s.name], never)
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if args.gates:
        gates = [float(x) for x in args.gates.split(",")]
        items = [float(x) for x in (args.items or args.gates).split(",")]
        gate_table(rows, sets, gates, items)
        return
    rows = [r for r in rows if not r.get("never_said")]
    answerable = [r for r in rows if not r["unanswerable"]]
    found = [r for r in answerable if r["cands"]]
    unanswerable = [r for r in rows if r["unanswerable"]]
    print(
        f"answerable {len(answerable)} (best gold among the checked candidates: {len(found)}), "
        f"unanswerable {len(unanswerable)}"
    )
    grid = sorted({c for r in found for c, _, _ in r["cands"]})
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
