"""How exact the sentence search's short list is, on real vectors at scale.

    python bench/sentence_scan.py --stores DIR [--rows 200000] [--k 100] [--queries 200]

Pools real sentence vectors: every sentence vector (sentence_vec) and fact vector (fact_vec)
of the stores in DIR (e.g. the stores `mem bench --stores DIR` kept), each row a sentence of
its own fact, up to --rows; if the stores hold fewer, the same rows are added again with
noise (a near-copy at cosine ~0.95, as chat repeats itself). Queries: the dataset questions of
../shared/datasets (LoCoMo and LongMemEval S), embedded with the stores' model as queries.
Builds one bank of those sentences in a new store (store/vectors.py SentenceScan) and
compares each query's k facts with the exact k (every row's cosine): the share of the exact
top 1 / 10 / k found, and the query's wall time (median), cold (first read of each float)
and warm (the same queries again). The same rows are also each fact's own vector, so the
fact search (BankScan, the semantic arm's other half) is measured the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import apsw
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# The norm of the noise a near-copy gets (cosine to its original ~0.95).
NOISE = 0.3
DATASETS = Path(os.environ.get("MEM_DATASETS", str(ROOT.parent / "shared" / "datasets")))


def real_rows(stores: Path, limit: int) -> np.ndarray:
    """Unit vectors (float32) of the stores' sentence and fact vectors, up to limit."""
    parts: list[np.ndarray] = []
    total = 0
    for db in sorted(stores.glob("*.db")):
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
        for sql in (
            "SELECT embedding FROM sentence_vec",
            "SELECT value00 FROM fact_vec_auxiliary",
        ):
            blobs = [r[0] for r in conn.execute(sql)]
            if blobs:
                rows = np.frombuffer(b"".join(blobs), dtype="<f2").reshape(len(blobs), -1)
                parts.append(rows.astype(np.float32))
                total += len(blobs)
        conn.close()
        if total >= limit:
            break
    rows = np.concatenate(parts)[:limit]
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def stores_embedders(stores: Path) -> set[str]:
    """The models the stores' banks record (queries must be embedded by the same)."""
    names: set[str] = set()
    for db in sorted(stores.glob("*.db")):
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
        names.update(r[0] for r in conn.execute("SELECT embedder FROM banks") if r[0])
        conn.close()
    return names


def questions(n: int) -> list[str]:
    out: list[str] = []
    for conv in json.loads((DATASETS / "locomo-dev.json").read_text()):
        out += [q["question"] for q in conv["qa"] if "question" in q]
    with (DATASETS / "longmemeval-s-dev.jsonl").open() as f:
        out += [json.loads(line)["question"] for line in f]
    step = max(1, len(out) // n)
    return out[::step][:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stores", type=Path, required=True)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--k", type=int, default=100, help="facts the sentence search finds")
    ap.add_argument("--fact-k", type=int, default=300, help="facts the fact search finds")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--embedder", help="the stores' model, for the queries (default: mem's)")
    args = ap.parse_args()

    from memcli.models.choice import DEFAULT_NAME
    from memcli.models.load import load_embedder
    from memcli.store import Store

    rows = real_rows(args.stores, args.rows)
    rng = np.random.default_rng(args.seed)
    real = len(rows)
    while len(rows) < args.rows:
        need = min(real, args.rows - len(rows))
        noise = rng.standard_normal((need, rows.shape[1])).astype(np.float32)
        extra = rows[:need] + NOISE * noise / np.sqrt(rows.shape[1])
        rows = np.concatenate([rows, extra / np.linalg.norm(extra, axis=1, keepdims=True)])
    embedder = load_embedder(args.embedder or DEFAULT_NAME)
    made_by = stores_embedders(args.stores)
    if made_by != {embedder.name}:
        raise SystemExit(f"the stores' vectors are of {sorted(made_by)}, not {embedder.name}")
    asked = questions(args.queries)
    qvecs = np.asarray(embedder.embed_queries(asked), dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "scan.db") as store:
        day = datetime(2026, 1, 1)
        with store.atomic():
            bank = store.banks.ensure_bank("default", day)
            store.vectors.ensure_vectors(bank, embedder.name, None, rows.shape[1])
            for i, row in enumerate(rows):
                fact_id = store.facts.insert_fact(
                    bank_id=bank,
                    text=f"sentence {i}",
                    context=None,
                    fact_type="world",
                    mentioned_at=day + timedelta(seconds=i),
                    occurred_start=None,
                    occurred_end=None,
                    tags=[],
                    metadata={},
                    source_id=None,
                    document_id=None,
                    chunk_id=None,
                    content_hash=f"scan-{i}",
                    entity_names=[],
                    embedding=row,
                    now=day,
                )
                store.vectors.add_sentence_vectors(fact_id, bank, "world", row[None, :])
        ids = np.asarray(store.facts.fact_ids_of_bank(bank), dtype=np.int64)
        halves = rows.astype("<f2").astype(np.float32)
        scan = store.vectors._sentence_matrix(bank)
        for label, search, k in (
            ("sentences", store.vectors.nearest_sentences, args.k),
            ("facts", store.vectors.nearest, args.fact_k),
        ):
            found: dict[int, list[float]] = {1: [], 10: [], k: []}
            times: dict[str, list[float]] = {"cold": [], "warm": []}
            for rnd in ("cold", "warm"):
                for q in qvecs:
                    t0 = time.perf_counter()
                    got = search(bank, q, k)
                    times[rnd].append((time.perf_counter() - t0) * 1000)
                    if rnd == "warm":
                        continue
                    exact = ids[np.argsort(-(halves @ q), kind="stable")[:k]]
                    mine = {f for f, _ in got}
                    for top in found:
                        found[top].append(len(mine & set(exact[:top].tolist())) / top)
            print(
                f"{label} (k = {k}): exact top found: "
                + ", ".join(f"top {t} {statistics.mean(v):.3f}" for t, v in found.items())
                + "; ms a query (median): "
                + ", ".join(f"{r} {statistics.median(v):.1f}" for r, v in times.items())
            )
        print(
            f"{len(rows)} rows ({real} real), {len(qvecs)} queries; the sentences' "
            f"{type(scan).__name__} holds {scan.nbytes / 1e6:.1f} MB before floats"
        )


if __name__ == "__main__":
    main()
