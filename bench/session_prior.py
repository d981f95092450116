"""A session prior on top of recall's order: measured, not adopted (bench/RESULTS.md).

    python bench/session_prior.py --stores /tmp/int-stores [--gap-hours 6]
                                  [--lambdas 0.02,0.05,0.1]

Over kept stores (`mem bench --stores`, one folder per dev set as bench/fit_fusion.py lays
them out), each answerable question is recalled with no floor and its 150 best candidates
re-ordered by final score (as a share of the best) + lambda x the z-score, among them, of the
cosine between the query and their session's vector. A session is a document, or else a run
of facts less than --gap-hours apart; its vector the normalised mean of its facts'. Printed:
R@10 / MRR (LongMemEval S: session R@5 / MRR) per set, as `mem bench` counts them; lambda 0
is recall's own order.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_floor import _is_gold  # noqa: E402
from fit_fusion import DEV_SETS, load_models  # noqa: E402

KEEP = 150


def sessions_of(store, bank: int, gap_hours: float) -> tuple[dict[int, int], dict[int, np.ndarray]]:
    """fact id -> session number, and each session's normalised mean vector."""
    ids = store.facts.fact_ids_of_bank(bank)
    facts = store.facts.facts_by_id(ids)
    vectors = store.vectors.fact_vectors(bank, ids)
    row = {f: i for i, f in enumerate(ids)}
    order = sorted(ids, key=lambda f: (facts[f].document_id or 0, facts[f].mentioned_at, f))
    session: dict[int, int] = {}
    number, previous = 0, None
    for f in order:
        fact = facts[f]
        if previous is not None and (
            fact.document_id != previous.document_id
            or (fact.mentioned_at - previous.mentioned_at).total_seconds() > gap_hours * 3600
        ):
            number += 1
        session[f] = number
        previous = fact
    members: dict[int, list[int]] = collections.defaultdict(list)
    for f, s in session.items():
        members[s].append(row[f])
    means = {}
    for s, rows in members.items():
        mean = vectors[rows].mean(0)
        means[s] = mean / (np.linalg.norm(mean) or 1.0)
    return session, means


def measure(s, stores: Path, model, gap_hours: float) -> list[dict]:
    from memcli.bench.datasets import iter_dataset
    from memcli.bench.runner import BANK, BenchOptions, _case_now, _kept_store_path
    from memcli.recall import RecallOptions, recall
    from memcli.settings import RecallSettings
    from memcli.store import Store

    options = BenchOptions(dataset=str(s.path), format=s.format, stores=str(stores / s.name))
    by_session = s.level == "session"
    out = []
    for index, case in enumerate(iter_dataset(s.path, s.format)):
        store = Store(_kept_store_path(stores / s.name, options, index, case, model))
        try:
            bank = store.banks.require_bank(BANK)
            session, means = sessions_of(store, bank, gap_hours)
            source_of = store.facts.source_ids(bank)
            session_of = {i.id: i.session_id for i in case.items}
            now = _case_now(case)
            for q in case.questions:
                if q.unanswerable or not (q.gold_ids or q.gold_sessions):
                    continue
                result = recall(
                    store,
                    BANK,
                    q.query,
                    RecallOptions(now=q.now or now, rerank=False),
                    embedder=model,
                    settings=RecallSettings(floor_cosine=0.0),
                )
                query_vec = model.embed_query(q.query)
                rows = []
                for c in result.ranked[:KEEP]:
                    source = source_of.get(c.fact_id)
                    key = session_of.get(source) if by_session else source
                    gold = _is_gold(c, q, source_of, session_of, by_session)
                    rows.append((c.final, float(means[session[c.fact_id]] @ query_vec), key, gold))
                gold_count = len(q.gold_sessions if by_session else q.gold_ids)
                out.append({"rows": rows, "gold": gold_count, "k": 5 if by_session else 10})
        finally:
            store.close()
    return out


def score(questions: list[dict], lam: float) -> tuple[float, float]:
    recalls, reciprocal = [], []
    for q in questions:
        if not q["rows"]:
            recalls.append(0.0)
            reciprocal.append(0.0)
            continue
        final = np.array([r[0] for r in q["rows"]])
        prior = np.array([r[1] for r in q["rows"]])
        mixed = final / (final.max() or 1.0) + lam * (prior - prior.mean()) / (prior.std() + 1e-9)
        seen: list = []
        for i in np.argsort(-mixed, kind="stable"):
            if q["rows"][i][2] not in seen:
                seen.append(q["rows"][i][2])
        gold = {r[2] for r in q["rows"] if r[3]}
        recalls.append(len(gold & set(seen[: q["k"]])) / max(q["gold"], 1))
        reciprocal.append(next((1 / (j + 1) for j, key in enumerate(seen) if key in gold), 0.0))
    return float(np.mean(recalls)), float(np.mean(reciprocal))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=Path, required=True)
    parser.add_argument("--sets", default="locomo,lme,cjk,cjk-chat")
    parser.add_argument("--gap-hours", type=float, default=6.0)
    parser.add_argument("--lambdas", default="0.02,0.05,0.1")
    args = parser.parse_args()
    sets = [DEV_SETS[name] for name in args.sets.split(",")]
    models = load_models(sets, None)
    measured = {s.name: measure(s, args.stores, models[s.name], args.gap_hours) for s in sets}
    for lam in [0.0, *(float(x) for x in args.lambdas.split(","))]:
        cells = [f"{name} %.3f / %.3f" % score(qs, lam) for name, qs in measured.items()]
        print(f"lambda {lam:g}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
