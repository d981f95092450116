"""Both embedders as two semantic arms: what MiniLM's arm beside e5's would give.

    python bench/two_embedders.py --e5-stores /tmp/int-stores --minilm-stores /tmp/mini \
        [--sets locomo,cjk,cjk-chat,lme] [--weights 0.5,1]

mem keeps one embedder per bank, so this is measured without a second vector table: each dev
set is retained twice into kept stores (`mem bench --stores`, once with MEM_EMBEDDER=e5, once
with =minilm; the same retain code makes the same facts in the same order), and every
question runs through the real recall pipeline on the e5 store, with one more arm in fusion:
the real semantic arm run on the MiniLM store with MiniLM's query vector, its hits mapped to
the e5 store's facts by (source id, text). Its fusion weight is the grid's; the other arms,
fusion, boosts, floor and metrics are `mem bench`'s. The retain cost of "both" is the sum of
the two embedders' (bench/embedder_speed.py), its query cost one more query embedding.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit_fusion import DEV_SETS, ArmMemo, DevSet  # noqa: E402

_local = threading.local()


class SecondArm:
    """The MiniLM semantic arm, added to the arms fusion gets: `install` patches this
    process's semantic arm (to see each query's context) and fusion (to add the arm)."""

    current: SecondArm | None = None

    def __init__(self, minilm_root: Path, set_name: str, model: Any):
        self.root, self.set_name, self.model = minilm_root, set_name, model
        self.stores: dict[str, tuple[Any, int, dict[int, int]]] = {}
        self.weight = 1.0

    @classmethod
    def install(cls) -> None:
        from memcli.recall import fusion, semantic

        run, fuse = semantic.run, fusion.fuse

        def semantic_run(ctx, *args):
            _local.ctx = ctx
            return run(ctx, *args)

        def fuse_with(arms, method, k, rrf_weights, score_weights, *rest):
            extra, ctx = cls.current, getattr(_local, "ctx", None)
            if extra is not None and ctx is not None and extra.weight > 0:
                arms = {**arms, "minilm": extra.arm(ctx, run)}
                score_weights = {**score_weights, "minilm": extra.weight}
            _local.ctx = None
            return fuse(arms, method, k, rrf_weights, score_weights, *rest)

        semantic.run = semantic_run
        fusion.fuse = fuse_with

    def _twin(self, store: Any, bank_id: int) -> tuple[Any, int, dict[int, int]]:
        """The MiniLM store made from the same case, its bench bank, fact id -> e5 fact id."""
        from memcli.store import Store

        path = Path(str(store.path))
        key = str(path)
        if key not in self.stores:
            prefix = "-".join(path.name.split("-")[:2]) + "-"
            folder = self.root / self.set_name
            twins = [p for p in folder.glob(prefix + "*.db") if Path(f"{p}.done").exists()]
            if len(twins) != 1:
                raise SystemExit(f"no single MiniLM twin of {path.name} in {folder}")
            twin = Store(twins[0])
            twin_bank = twin.banks.require_bank("bench")

            def keyed(s: Any, bank: int) -> dict[tuple, int]:
                sources = s.facts.source_ids(bank)
                facts = s.facts.facts_by_id(list(sources), bank)
                return {(sources[f], facts[f].text): f for f in facts}

            mine = keyed(store, bank_id)
            theirs = keyed(twin, twin_bank)
            mapping = {theirs[k]: mine[k] for k in theirs if k in mine}
            if len(mapping) < 0.99 * len(mine):
                raise SystemExit(f"{twins[0].name} holds other facts than {path.name}")
            self.stores[key] = (twin, twin_bank, mapping)
        return self.stores[key]

    def arm(self, ctx: Any, run: Any) -> Any:
        from dataclasses import replace

        from memcli.recall.types import ArmHit, ArmResult

        twin, bank, mapping = self._twin(ctx.store, ctx.bank_id)
        vec = self.model.embed_query(ctx.query)
        found = run(replace(ctx, store=twin, bank_id=bank, query_vec=vec))
        hits = [ArmHit(mapping[h.fact_id], h.score) for h in found.hits if h.fact_id in mapping]
        return ArmResult("minilm", hits, "cosine", score_floor=found.score_floor)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--e5-stores", type=Path, required=True)
    parser.add_argument("--minilm-stores", type=Path, required=True)
    parser.add_argument("--sets", default="locomo,cjk,cjk-chat,lme")
    parser.add_argument("--weights", default="0,0.3,0.5,1")
    args = parser.parse_args()
    os.environ["TZ"] = "UTC"  # as mem bench: the datasets' wall clock

    from fit_fusion import load_models, score

    sets: list[DevSet] = [DEV_SETS[name] for name in args.sets.split(",")]
    models = load_models(sets, "e5")
    from memcli.models.load import load_embedder
    from memcli.store.vector_cache import cached

    minilm = cached(load_embedder("minilm"))
    ArmMemo()  # first: the arms' lists are computed once, the added arm's too
    SecondArm.install()
    rows = []
    for s in sets:
        extra = SecondArm.current = SecondArm(args.minilm_stores, s.name, minilm)
        for weight in [float(w) for w in args.weights.split(",")]:
            extra.weight = weight
            got = score(s, args.e5_stores, models, {})
            a, b = s.headline
            print(f"{s.name:9} minilm weight {weight:4}: {a} {got[a]:.3f} MRR {got[b]:.3f}")
            rows.append({"set": s.name, "weight": weight, a: got[a], b: got[b]})
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
