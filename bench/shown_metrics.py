"""What recall ranks against what it shows: the dev sets' figures over the printed results.

    python bench/shown_metrics.py --stores /tmp/int-stores [--sets locomo,cjk,cjk-chat,lme]
                                  [--item-shares 1,0.85]

`mem bench` scores the ranked candidates (R@10 and MRR before the relevance floor and the token
budget; what those cut is its bLoss column). A caller of `mem recall --format json` sees only
the results printed, after both. This runs every dev set through the real pipeline over kept
stores (bench/fit_fusion.py's runs) and prints both figures, for each value of the setting
floor_item_share (once one candidate reaches the floor, the others are shown down to that
share of it; 1 = the floor for every memory, the default).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fit_fusion  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=Path, required=True)
    parser.add_argument("--sets", default="locomo,cjk,cjk-chat,lme")
    parser.add_argument("--item-shares", default="1")
    args = parser.parse_args()

    from memcli.bench import runner
    from memcli.bench.metrics import dedupe_ranked

    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    current = [""]
    original = runner._Scorer.score

    def score(self, case, question, result, source_of, session_of):
        lme = current[0] == "lme"

        def figures(facts) -> tuple[float, float] | None:
            seq = dedupe_ranked(s for c in facts if (s := source_of.get(c.fact_id)) is not None)
            gold = question.gold_sessions if lme else question.gold_ids
            if lme:
                seq = dedupe_ranked(session_of.get(s) for s in seq)
            if not gold:
                return None
            rr = next((1 / (i + 1) for i, s in enumerate(seq) if s in gold), 0.0)
            return len(set(seq[: 5 if lme else 10]) & gold) / len(gold), rr

        ranked, shown = figures(result.ranked), figures(result.results)
        if ranked is not None and shown is not None:
            rows.setdefault(current[0], []).append((*ranked, *shown))
        return original(self, case, question, result, source_of, session_of)

    runner._Scorer.score = score
    sets = [fit_fusion.DEV_SETS[name] for name in args.sets.split(",") if name]
    models = fit_fusion.load_models(sets, None)
    print("figures: R@10 / MRR (LongMemEval S: session R@5 / MRR), ranked -> shown")
    for share in (float(x) for x in args.item_shares.split(",")):
        rows.clear()
        for s in sets:
            current[0] = s.name
            fit_fusion.score(s, args.stores, models, {"floor_item_share": share})
        parts = []
        for name, values in rows.items():
            a = np.mean(values, axis=0)
            parts.append(f"{name} {a[0]:.3f} / {a[1]:.3f} -> {a[2]:.3f} / {a[3]:.3f}")
        print(f"floor_item_share {share}: " + "; ".join(parts), flush=True)


if __name__ == "__main__":
    main()
