"""What recall ranks against what it shows: the dev sets' figures over the printed results.

    python bench/shown_metrics.py --stores /tmp/int-stores [--sets locomo,cjk,cjk-chat,lme]
                                  [--item-shares calibrated,1,0.85]

`mem bench` scores the ranked candidates (the level "item", or "session" for LongMemEval S)
and, beside them, what recall printed after the relevance floor and the token budget (the
level "shown" / "session shown"): what a caller of `mem recall --format json` sees. This runs
every dev set through the real pipeline over kept stores (bench/fit_fusion.py's runs) and
prints both headline figures, for each value of the setting floor_item_share (once one
candidate reaches the floor, the others are shown down to that share of it; 1 = the question
floor for every memory; "calibrated" = the embedder's own item floor, the default).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fit_fusion  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=Path, required=True)
    parser.add_argument("--sets", default="locomo,cjk,cjk-chat,lme")
    parser.add_argument("--item-shares", default="calibrated")
    args = parser.parse_args()
    sets = [fit_fusion.DEV_SETS[name] for name in args.sets.split(",") if name]
    models = fit_fusion.load_models(sets, None)
    print("figures: R@10 / MRR (LongMemEval S: session R@5 / MRR), ranked -> shown")
    for share in (None if x == "calibrated" else float(x) for x in args.item_shares.split(",")):
        parts = []
        for s in sets:
            got = fit_fusion.score(s, args.stores, models, {"floor_item_share": share}, levels=True)
            a, b = s.headline
            shown = "shown" if s.level == "item" else f"{s.level} shown"
            seen = got["levels"][shown]["overall"]["metrics"]
            parts.append(f"{s.name} {got[a]:.3f} / {got[b]:.3f} -> {seen[a]:.3f} / {seen[b]:.3f}")
        print(f"floor_item_share {share or 'calibrated'}: " + "; ".join(parts), flush=True)


if __name__ == "__main__":
    main()
