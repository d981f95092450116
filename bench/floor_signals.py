"""Measure question-level signals that could tell an unanswerable question from an answerable one.

    python bench/floor_signals.py --stores /tmp/mem-stores [--sets locomo,cjk-chat]
                                  [--embedder e5] [--keep 0.97] [--out rows.jsonl]

The relevance floor (memcli/recall/floor.py) keeps 97% of the dev sets' answerable questions'
best gold items but empties almost no unanswerable question: LoCoMo category 5 names one
speaker and asks about what the OTHER one did, so the topic is in the bank and close in
cosine. This script asks whether any generic signal separates the two kinds of question,
over the same kept stores as bench/calibrate_floor.py (`mem bench --stores`, one folder per
set). Each question is recalled with no floor; the people it names are the bank's speakers
(fact contexts) it holds as whole words (CJK: as a substring, CJK has no word boundaries);
a candidate is "attributed" when such a person said it or its text names them. Signals,
higher = more likely answerable:

- max_cosine: the best cosine of the checked candidates (today's floor, per question);
- top1_attributed: 0 when the query names someone and the best-ranked candidate is neither
  said by nor about them;
- cosine_contrast: best cosine of the query without the name, attributed minus the rest;
- coverage_contrast: best share of the query's other terms (IDF-weighted) a candidate's own
  words hold, attributed minus the rest;
- name_swap: best cosine over the bank of the query, minus that of the query with the name
  replaced by another speaker (the best of them).

For each: the threshold that keeps --keep of the answerable questions (question level), the
share of unanswerable questions below it, and the AUC; then today's floor gated by
top1_attributed, scored as mem bench scores the floor (best gold kept, unanswerable empty).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_floor import _is_gold  # noqa: E402
from fit_fusion import DEV_SETS, load_models  # noqa: E402

CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
SIGNALS = ("max_cosine", "top1_attributed", "cosine_contrast", "coverage_contrast", "name_swap")


def names_in(query: str, contexts: list[str]) -> set[str]:
    """The speakers a query names, lower-cased; a name inside a longer named one is dropped."""
    from memcli import fts

    lowered = query.lower()
    found = {
        c.lower()
        for c in contexts
        if c.lower() not in fts.STOP_WORDS and _holds(lowered, c.lower())
    }
    return {n for n in found if not any(n != m and n in m for m in found)}


def _holds(text: str, name: str) -> bool:
    if CJK.search(name):
        return name in text
    return re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", text) is not None


def _replace(query: str, name: str, by: str) -> str:
    if CJK.search(name):
        return re.sub(re.escape(name), by, query, flags=re.I)
    return re.sub(r"(?<!\w)" + re.escape(name) + r"(?!\w)", by, query, flags=re.I)


def _strip(query: str, names: set[str]) -> str:
    out = query
    for n in sorted(names, key=len, reverse=True):
        tail = "的?" if CJK.search(n) else r"(?:'s|’s)?(?!\w)"
        head = "" if CJK.search(n) else r"(?<!\w)"
        out = re.sub(head + re.escape(n) + tail, "", out, flags=re.I)
    return re.sub(r"\s+", " ", out).strip() or query


def measure(s, stores: Path, model) -> list[dict]:
    from memcli import fts
    from memcli.bench.datasets import iter_dataset
    from memcli.bench.runner import BANK, BenchOptions, _case_now, _kept_store_path
    from memcli.recall import RecallOptions, recall
    from memcli.recall.floor import CHECKED
    from memcli.settings import RecallSettings
    from memcli.store import Store

    settings = RecallSettings(floor_cosine=0.0)
    options = BenchOptions(dataset=str(s.path), format=s.format, stores=str(stores / s.name))
    out: list[dict] = []
    for index, case in enumerate(iter_dataset(s.path, s.format)):
        path = _kept_store_path(stores / s.name, options, index, case, model)
        if not (path.exists() and Path(f"{path}.done").exists()):
            raise SystemExit(f"{s.name}: no kept store for case {case.id} (run mem bench --stores)")
        store = Store(path)
        try:
            bank = store.banks.require_bank(BANK)
            all_ids = store.facts.fact_ids_of_bank(bank)
            facts = store.facts.facts_by_id(all_ids)
            bank_vectors = store.vectors.fact_vectors(bank, all_ids)
            contexts = sorted({f.context for f in facts.values() if f.context})
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
                if not head:
                    continue
                ids = [c.fact_id for c in head]
                names = names_in(q.query, contexts)
                query_vec = model.embed_query(q.query)
                cos = store.vectors.fact_vectors(bank, ids) @ query_vec
                stripped = store.vectors.fact_vectors(bank, ids) @ model.embed_query(
                    _strip(q.query, names)
                )
                attributed = np.array(
                    [
                        not names
                        or (facts[f].context or "").lower() in names
                        or any(_holds(facts[f].text.lower(), n) for n in names)
                        for f in ids
                    ]
                )
                terms = [
                    t
                    for t in dict.fromkeys(fts.query_terms(q.query))
                    if not any(t in n or n in t for n in names)
                ]
                weight = {
                    t: math.log(1 + len(all_ids) / (1 + store.search.keyword_match_count(t)))
                    for t in terms
                }
                held = np.zeros(len(ids))
                for t in terms:
                    hit = store.search.own_words_match(ids, [t])
                    held += np.array([weight[t] if f in hit else 0.0 for f in ids])
                coverage = held / max(sum(weight.values()), 1e-9)
                gold = [
                    i
                    for i, c in enumerate(head)
                    if not q.unanswerable
                    and _is_gold(c, q, source_of, session_of, s.level == "session")
                ]
                row = {
                    "set": s.name,
                    "id": q.id,
                    "unanswerable": q.unanswerable,
                    "best_gold": gold[0] if gold else None,
                    "cos": cos.round(4).tolist(),
                    "max_cosine": float(cos.max()),
                    "top1_attributed": float(attributed[0]),
                    "cosine_contrast": _contrast(stripped, attributed),
                    "coverage_contrast": _contrast(coverage, attributed),
                    "name_swap": 0.0,
                }
                if len(names) == 1:
                    (name,) = names
                    others = [
                        c
                        for c in contexts
                        if c.lower() not in fts.STOP_WORDS
                        and name not in c.lower()
                        and c.lower() not in name
                    ]
                    best = float((bank_vectors @ query_vec).max())
                    swapped = [
                        float((bank_vectors @ model.embed_query(_replace(q.query, name, o))).max())
                        for o in others
                    ]
                    row["name_swap"] = best - max(swapped) if swapped else 0.0
                row["full_words"] = [float(f) for f in _full_coverage(store, q.query, ids)]
                out.append(row)
        finally:
            store.close()
    return out


def _contrast(values: np.ndarray, attributed: np.ndarray) -> float:
    """Best value among attributed candidates minus best among the rest (0 when one is empty)."""
    if attributed.all() or not attributed.any():
        return 0.0
    return float(values[attributed].max() - values[~attributed].max())


def _full_coverage(store, query: str, ids: list[int]) -> list[bool]:
    from memcli.recall.floor import term_coverage

    share = term_coverage(store, query, ids)
    return [share.get(f, 0.0) >= 1.0 for f in ids]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=Path, required=True)
    parser.add_argument("--sets", default="locomo,cjk-chat")
    parser.add_argument("--embedder", default=os.environ.get("MEM_EMBEDDER") or None)
    parser.add_argument("--keep", type=float, default=0.97)
    parser.add_argument("--cosine-floor", type=float, default=0.366, help="e5's one-level floor")
    parser.add_argument("--out", type=Path, help="per-question rows (JSONL)")
    args = parser.parse_args()
    os.environ["TZ"] = "UTC"
    sets = [DEV_SETS[n] for n in args.sets.split(",")]
    models = load_models(sets, args.embedder)
    rows = [r for s in sets for r in measure(s, args.stores, models[s.name])]
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for s in sets:
        answerable = [r for r in rows if r["set"] == s.name and r["best_gold"] is not None]
        unanswerable = [r for r in rows if r["set"] == s.name and r["unanswerable"]]
        print(
            f"{s.name}: answerable with gold checked {len(answerable)},"
            f" unanswerable {len(unanswerable)}"
        )
        for name in SIGNALS:
            a = np.array([r[name] for r in answerable])
            u = np.array([r[name] for r in unanswerable])
            threshold = np.percentile(a, 100 * (1 - args.keep))
            auc = float(np.mean(a[:, None] > u[None, :]) + 0.5 * np.mean(a[:, None] == u[None, :]))
            print(
                f"  {name:18s} keeps {np.mean(a >= threshold):.3f} of answerable"
                f" at {threshold:+.3f}:"
                f" empties {np.mean(u < threshold):.2f} of unanswerable  AUC {auc:.2f}"
            )
        for gated in (False, True):

            def passes(r, i, gated=gated):
                return (r["cos"][i] >= args.cosine_floor or r["full_words"][i]) and (
                    not gated or r["top1_attributed"] > 0
                )

            kept = np.mean([passes(r, r["best_gold"]) for r in answerable])
            empty = np.mean(
                [not any(passes(r, i) for i in range(len(r["cos"]))) for r in unanswerable]
            )
            label = "floor gated by top1_attributed" if gated else "floor today"
            print(f"  {label:32s} best gold kept {kept:.3f}  unanswerable empty {empty:.2f}")


if __name__ == "__main__":
    main()
