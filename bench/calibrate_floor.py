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

`--cross-script N` calibrates the floor between scripts (recall/floor.py CROSS_SCRIPT_FLOORS):
the answerable questions written in another script than their store's memories (the CJK
sets' English questions), and N questions of the other script's sets asked of the first
`--cross-stores` stores of every set (Chinese, Japanese and Korean questions of the English
stores, English ones of the CJK stores: about nothing they hold). For each gate, over the
candidates in the other script only: how many answerable questions pass it, where their best
gold item lies, and how many of the questions about nothing it empties.
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
                result = _recall_unfloored(store, query, q, now, model, settings)
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
    """(cosine to the whole query, share of its terms held, found in its time, in another
    script than the query) per candidate."""
    from memcli.recall.floor import fact_cosines, term_coverage

    ids = [c.fact_id for c in chosen]
    cos = fact_cosines(store, bank, ids, model.embed_query(query)).tolist()
    cov = term_coverage(store, query, ids)
    return [
        [
            round(a, 4),
            round(cov.get(c.fact_id, 0.0), 4),
            int(c.fact_id in timely),
            int(_across(query, c.fact.text)),
        ]
        for a, c in zip(cos, chosen)
    ]


def _across(query: str, text: str) -> bool:
    """Whether recall's floor holds this text to the floor across scripts for this query."""
    from memcli import lang

    return lang.in_other_script(lang.writing(query), text)


def _recall_unfloored(store, query: str, question, now, model, settings):
    """A question recalled as the floor sees it (settings without a floor), asked at its
    own time or the case's."""
    from memcli.bench.runner import BANK
    from memcli.recall import RecallOptions, recall

    return recall(
        store,
        BANK,
        query,
        RecallOptions(now=(question.now if question else None) or now, rerank=False),
        embedder=model,
        settings=settings,
    )


def _is_gold(
    candidate, question, source_of: dict, session_of: dict, by_session: bool = False
) -> bool:
    """Gold items of the question (LongMemEval, scored by session: facts of a gold session)."""
    source = source_of.get(candidate.fact_id)
    if question.gold_ids and not by_session:
        return source in question.gold_ids
    return session_of.get(source) in question.gold_sessions


def passes(
    cands: list,
    cos_floor: float,
    cov_floor: float,
    cross: float | None = None,
    wordless: float | None = None,
) -> bool:
    """Whether one of the candidates passes: by cosine (to `cross` when it is in another
    script than the query and a cross-script floor is given), by words, or by time.
    wordless: a candidate in the query's script passes on a cosine below this only when its
    own words hold one of the query's terms (measured, not recall's rule: bench/RESULTS.md)."""

    def floor(row: list) -> float:
        return cross if cross is not None and len(row) > 3 and row[3] else cos_floor

    def by_cosine(row: list) -> bool:
        if row[0] < floor(row):
            return False
        across = len(row) > 3 and row[3]
        return wordless is None or across or row[0] >= wordless or row[1] > 0

    return any(by_cosine(row) or row[1] >= cov_floor or row[2] for row in cands)


def gate_table(
    rows: list[dict],
    sets,
    gates: list[float],
    items: list[float],
    cross: float | None = None,
    wordless: float | None = None,
) -> None:
    """Each (gate, item floor): answerable best gold kept per set, unanswerable and never
    said questions emptied (keyword coverage floor 1, as recall uses). cross: the question
    floor for a candidate in another script than the query (its item floor the same share
    of it), as recall applies it; None: the gate for every candidate. wordless: see passes
    (the question gate only)."""
    print(f"{'gate':>5} {'item':>5}  " + "  ".join(f"{s.name:>22}" for s in sets) + "   all kept")
    for gate in gates:
        for item in items:
            cells, kept_all = [], []
            for s in sets:
                a = [r for r in rows if r["set"] == s.name and not r["unanswerable"]]
                cross_item = cross * item / gate if cross is not None else None
                kept = [
                    bool(r["cands"])
                    and passes(r["head"], gate, 1.0, cross, wordless)
                    and passes(r["cands"], item, 1.0, cross_item)
                    for r in a
                ]
                kept_all += kept
                u = [r for r in rows if r["set"] == s.name and r["unanswerable"]]
                dev = [
                    not passes(r["cands"], gate, 1.0, cross, wordless)
                    for r in u
                    if not r["never_said"]
                ]
                never = [
                    not passes(r["cands"], gate, 1.0, cross, wordless) for r in u if r["never_said"]
                ]
                cells.append(f"{np.mean(kept):.3f} {_share(dev)} {_share(never)}")
            print(
                f"{gate:>5} {item:>5}  "
                + "  ".join(f"{c:>22}" for c in cells)
                + f"   {np.mean(kept_all):.3f}"
            )
    print("cell: answerable best gold kept, dev unanswerable emptied, never said emptied")


def cross_script_rows(sets, stores: Path, models, n: int, first_stores: int) -> list[dict]:
    """Per question asked across scripts: every checked candidate as (cosine, in another
    script than the query, gold), recalled with no floor (and the semantic arm's own floor,
    as recall runs it)."""
    from memcli import lang
    from memcli.bench.datasets import iter_dataset
    from memcli.bench.runner import BANK, BenchOptions, _case_now, _kept_store_path
    from memcli.recall.floor import CHECKED, fact_cosines
    from memcli.settings import RecallSettings
    from memcli.store import Store

    def pool(names: list[str]) -> list[str]:
        out = []
        for name in names:
            out += [q for q in questions_of(DEV_SETS[name], 10 * n, seed=7) if cjk_of(q, name)][:n]
        return out

    def cjk_of(text: str, set_name: str) -> bool:
        # a question of a set counts when it is in that set's own script
        return lang.is_mostly_cjk(text) == set_name.startswith("cjk")

    english = pool(["locomo", "lme"])
    cjk = pool(["cjk", "cjk-chat"])
    settings = RecallSettings(floor_cosine=0.0)
    rows: list[dict] = []
    for s in sets:
        model = models[s.name]
        store_cjk = s.name.startswith("cjk")
        options = BenchOptions(dataset=str(s.path), format=s.format, stores=str(stores / s.name))
        for index, case in enumerate(iter_dataset(s.path, s.format)):
            own = [
                q
                for q in case.questions
                if (q.gold_ids or q.gold_sessions)
                and not q.unanswerable
                and lang.is_mostly_cjk(q.query) != store_cjk
            ]
            foreign = (english if store_cjk else cjk) if index < first_stores else []
            if not own and not foreign:
                continue
            store = Store(_kept_store_path(stores / s.name, options, index, case, model))
            try:
                bank = store.banks.require_bank(BANK)
                source_of = store.facts.source_ids(bank)
                session_of = {i.id: i.session_id for i in case.items}
                now = _case_now(case)
                for query, q in [(q.query, q) for q in own] + [(t, None) for t in foreign]:
                    result = _recall_unfloored(store, query, q, now, model, settings)
                    head = result.ranked[:CHECKED]
                    ids = [c.fact_id for c in head]
                    cosines = fact_cosines(store, bank, ids, model.embed_query(query)).tolist()
                    cands = [
                        [
                            round(cos, 4),
                            int(_across(query, c.fact.text)),
                            int(q is not None and _is_gold(c, q, source_of, session_of)),
                        ]
                        for c, cos in zip(head, cosines)
                    ]
                    rows.append(
                        {"set": s.name, "query": query, "never_said": q is None, "cands": cands}
                    )
            finally:
                store.close()
    return rows


def cross_script_table(rows: list[dict], gates: list[float], item_share: float) -> None:
    """Per gate, over the candidates in the other script: answerable questions passing it
    and keeping their best gold item at gate x item_share; questions about nothing emptied."""
    answerable = [r for r in rows if not r["never_said"]]
    never = [r for r in rows if r["never_said"]]

    def best(r: dict, gold_only: bool) -> float | None:
        values = [c for c, other, g in r["cands"] if other and (g or not gold_only)]
        return max(values) if values else None

    golds = sorted(round(b, 3) for r in answerable if (b := best(r, True)) is not None)
    print(f"answerable across scripts: {len(answerable)}; best gold cosines: {golds}")
    print(f"questions about nothing held, across scripts: {len(never)}")
    print(f"{'gate':>5} {'item':>6}  passing  best gold kept  nothing-said emptied")
    for gate in gates:
        item = gate * item_share
        passing = [r for r in answerable if (best(r, False) or -1.0) >= gate]
        kept = [r for r in passing if (best(r, True) or -1.0) >= item]
        emptied = [r for r in never if (best(r, False) or -1.0) < gate]
        print(
            f"{gate:>5} {item:>6.3f}  {len(passing):>3}/{len(answerable)}  "
            f"{len(kept):>8}/{len(answerable)}  {len(emptied):>8}/{len(never)} "
            f"({len(emptied) / max(len(never), 1):.0%})"
        )


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
    parser.add_argument(
        "--cross-script", type=int, default=0, help="questions of the other script, a store"
    )
    parser.add_argument("--cross-stores", type=int, default=3, help="stores a set asked so")
    parser.add_argument(
        "--wordless",
        type=float,
        help="with --gates: below this cosine a candidate passes the gate only when it "
        "shares a term with the query",
    )
    args = parser.parse_args()
    os.environ["TZ"] = "UTC"
    sets = [DEV_SETS[n] for n in args.sets.split(",")]
    if args.cross_script:
        from memcli.recall.floor import COSINE_FLOORS

        models = load_models(sets, args.embedder)
        rows = cross_script_rows(sets, args.stores, models, args.cross_script, args.cross_stores)
        if args.out:
            args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        name = models[sets[0].name].name
        if name not in COSINE_FLOORS:
            raise SystemExit(f"{name} has no calibrated floor (recall/floor.py COSINE_FLOORS)")
        question, item = COSINE_FLOORS[name]
        gates = [float(x) for x in (args.gates or "0.28,0.30,0.31,0.32,0.34,0.38").split(",")]
        cross_script_table(rows, gates, item / question)
        return
    if args.rows:
        rows = [json.loads(line) for line in args.rows.read_text().splitlines()]
        if any(len(c) < 4 for r in rows for c in (r.get("head") or r["cands"])):
            raise SystemExit(
                f"{args.rows}: rows of an older calibrate_floor (no script column); "
                "measure again without --rows"
            )
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
        from memcli.models.choice import DEFAULT_NAME
        from memcli.models.load import load_embedder
        from memcli.recall.floor import CROSS_SCRIPT_FLOORS

        name = load_embedder(args.embedder or DEFAULT_NAME).name
        gate_table(rows, sets, gates, items, CROSS_SCRIPT_FLOORS.get(name), args.wordless)
        return
    rows = [r for r in rows if not r.get("never_said")]
    answerable = [r for r in rows if not r["unanswerable"]]
    found = [r for r in answerable if r["cands"]]
    unanswerable = [r for r in rows if r["unanswerable"]]
    print(
        f"answerable {len(answerable)} (best gold among the checked candidates: {len(found)}), "
        f"unanswerable {len(unanswerable)}"
    )
    grid = sorted({row[0] for r in found for row in r["cands"]})
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
