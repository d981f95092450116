"""A learned linear ranker over the candidates' signals, left one dev set out: how much a
re-weighting of what recall already knows could gain (measured, not adopted).

    python bench/fit_ranker.py --stores /tmp/int-stores [--sets locomo,cjk,cjk-chat,lme]
                               [--features final,speaker,loglen]

Every dev set runs through the real pipeline over kept stores (bench/fit_fusion.py's runs);
for each question its 150 best candidates are kept with their signals: each arm's min-max
score and 1 / (5 + rank), the fusion, reply, base and final scores, the speaker, recency and
temporal boosts, whether the text ends in "?", and log(1 + words). A linear model over the
standardised signals, trained with a listwise softmax loss (the gold candidates' share) from
the present order (a weight on `final`), is fit on three sets and scored on the fourth, with
the metrics `mem bench` reports (item R@10 / MRR; LongMemEval S session R@5 / MRR). Then one
fit on all four, in-sample, and its weights.
"""

import argparse
import collections
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fit_fusion  # noqa: E402

SETS = ("locomo", "cjk", "cjk-chat", "lme")
KEEP = 150


def dump(stores: Path, sets: list[str]) -> list[dict]:
    """Each question's candidates and signals, from a real bench run per set."""
    from memcli.bench import runner
    from memcli.recall.types import ARMS

    out: list[dict] = []
    current = [""]
    original = runner._Scorer.score

    def score(self, case, question, result, source_of, session_of):
        ranges = {}
        for name, arm in result.arms.items():
            scores = [h.score for h in arm.hits]
            ranges[name] = (min(scores), max(scores)) if scores else (0.0, 0.0)
        rows = []
        for c in result.ranked[:KEEP]:
            signals = {}
            for name in ARMS:
                s = c.arm_scores.get(name)
                lo, hi = ranges.get(name, (0.0, 0.0))
                signals[f"n_{name}"] = (
                    0.0 if s is None else ((s - lo) / (hi - lo) if hi > lo else 1.0)
                )
                r = c.ranks.get(name)
                signals[f"r_{name}"] = 0.0 if r is None else 1.0 / (5 + r)
            text = c.fact.text
            signals.update(
                fused=c.fused,
                reply=c.reply,
                base=c.base,
                final=c.final,
                speaker=c.speaker,
                recency=c.recency,
                temporal=c.temporal,
                qmark=float(text.rstrip().endswith("?")),
                loglen=math.log(1 + len(text.split())),
            )
            source = source_of.get(c.fact_id)
            rows.append((source, session_of.get(source) if session_of else None, signals))
        out.append(
            {
                "set": current[0],
                "gold": set(question.gold_ids),
                "gold_sessions": set(question.gold_sessions or ()),
                "rows": rows,
            }
        )
        return original(self, case, question, result, source_of, session_of)

    runner._Scorer.score = score
    try:
        chosen = [fit_fusion.DEV_SETS[name] for name in sets]
        models = fit_fusion.load_models(chosen, None)
        for s in chosen:
            current[0] = s.name
            fit_fusion.score(s, stores, models, {})
    finally:
        runner._Scorer.score = original
    return out


def label(q: dict, source: str | None, session: str | None) -> bool:
    return session in q["gold_sessions"] if q["set"] == "lme" else source in q["gold"]


def metrics(q: dict, order: list[int]) -> tuple[float, float] | None:
    """(R@k, reciprocal rank) as mem bench counts them: items (k 10), or LongMemEval
    sessions (k 5), de-duplicated in order."""
    lme = q["set"] == "lme"
    seq: list = []
    for i in order:
        key = q["rows"][i][1] if lme else q["rows"][i][0]
        if key not in seq:
            seq.append(key)
    gold = q["gold_sessions"] if lme else q["gold"]
    if not gold:
        return None
    rr = next((1 / (i + 1) for i, s in enumerate(seq) if s in gold), 0.0)
    return len(gold & set(seq[: 5 if lme else 10])) / len(gold), rr


def evaluate(qs: list, w=None, mu=None, sd=None) -> dict[str, tuple[float, float]]:
    out = collections.defaultdict(list)
    for q, x, _ in qs:
        order = (
            list(range(len(x)))
            if w is None
            else list(np.argsort(-(((x - mu) / sd) @ w), kind="stable"))
        )
        m = metrics(q, order)
        if m:
            out[q["set"]].append(m)
    return {
        k: (float(np.mean([a for a, _ in v])), float(np.mean([b for _, b in v])))
        for k, v in out.items()
    }


def fit(qs: list, names: list[str], l2: float = 1e-3, iters: int = 300, lr: float = 0.05):
    """Listwise softmax loss (Adam), from the present order (a weight on `final`)."""
    xs = np.vstack([x for _, x, _ in qs])
    mu, sd = xs.mean(0), xs.std(0) + 1e-9
    data = [((x - mu) / sd, y) for _, x, y in qs if y.any() and not y.all()]
    w = np.zeros(len(names))
    if "final" in names:
        w[names.index("final")] = 3.0
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t in range(1, iters + 1):
        g = np.zeros_like(w)
        for z, y in data:
            s = z @ w
            p = np.exp(s - s.max())
            p /= p.sum()
            pg = p * y
            pg /= pg.sum()
            g += z.T @ (p - pg)
        g = g / len(data) + l2 * w
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w -= lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return w, mu, sd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=Path, required=True)
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--features", default="", help="comma list (default: all)")
    args = parser.parse_args()
    sets = [s for s in args.sets.split(",") if s]
    questions = dump(args.stores, sets)
    first = next(q["rows"][0][2] for q in questions if q["rows"])
    names = [f for f in args.features.split(",") if f] or sorted(first)
    qs = []
    for q in questions:
        # A question with no candidates counts (as zeros), as mem bench counts it.
        x = np.array([[r[2][n] for n in names] for r in q["rows"]], dtype=np.float64)
        y = np.array([label(q, r[0], r[1]) for r in q["rows"]], dtype=bool)
        qs.append((q, x.reshape(len(q["rows"]), len(names)), y))
    base = evaluate(qs)
    print("features:", ", ".join(names))
    for held in sets:
        w, mu, sd = fit([x for x in qs if x[0]["set"] != held], names)
        got = evaluate([x for x in qs if x[0]["set"] == held], w, mu, sd)[held]
        b = base[held]
        print(
            f"held out {held:9s} present {b[0]:.3f} / {b[1]:.3f}  learned {got[0]:.3f} / "
            f"{got[1]:.3f}  objective {np.mean(b):.4f} -> {np.mean(got):.4f}"
        )
    w, mu, sd = fit(qs, names)
    fitted = evaluate(qs, w, mu, sd)
    print(
        "one fit on every set, in-sample:",
        ", ".join(f"{k} {a:.3f} / {b:.3f}" for k, (a, b) in fitted.items()),
    )
    for name, weight in sorted(zip(names, w), key=lambda t: -abs(t[1])):
        print(f"  {name:12s} {weight:+.3f}")


if __name__ == "__main__":
    main()
