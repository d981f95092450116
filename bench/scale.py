"""Scale benchmark: one store grown to 10k, 30k and 100k facts from real chat text.

    python bench/scale.py [--sizes 10000,30000,100000] [--imports-per-size 2,2,4]
                          [--queries 20] [--batch-queries 40] [--raw-sample 1500]
                          [--keep DIR] [--resume]
    python bench/scale.py --components 10000,100000    # the vector search alone, CPU ms
    python bench/scale.py --measure DIR/scale-10000.db ...  # recall figures of kept stores
    python bench/scale.py --retain-into DIR/scale-10000.db ...  # one import into each, timed
    python bench/scale.py --check-links DIR/scale-100000.db  # the link search's recall
    python bench/scale.py --store postgresql://...  # the same, grown in a PostgreSQL store

Text: the sentences of the user and assistant turns of LongMemEval's oracle split
(../shared/datasets/longmemeval-oracle.json, ~100k distinct sentences, read from there), in
session-date order; each sentence is one item, its session is its document, its speaker
("user" / "assistant") its context, its time the session's date plus a minute per turn.

The store grows by several imports (`mem retain --jsonl`, a process each): the first import
into an empty file, every later one into the store the earlier ones built. At each size it
prints:
- retain facts/s of the imports that grew the store to that size, and the ratio to the raw
  embedder (MiniLM `embed()` in batches of 64, in this process, right after the imports, on a
  sample of the exact strings retain embeds for those items: text, speaker, date, lead-in);
- cold recall: the whole `mem recall QUERY` process, p50 / p95 over --queries questions;
- warm recall: `mem recall --batch` of n queries minus the same with 1 query, over n - 1;
- store size (db + wal after a checkpoint) per fact, links per fact;
- peak RSS of the retain processes and of the recall processes.
With --keep DIR the store stays in DIR, with a copy at each size (scale-SIZE.db) that
--measure can time again after the code changes.

The mem processes get compiled modules, as an installed tool has (this shell may set
PYTHONDONTWRITEBYTECODE, which would make every cold start compile memcli from source).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATASET = (
    Path(os.environ.get("MEM_DATASETS", str(ROOT.parent / "shared" / "datasets")))
    / "longmemeval-oracle.json"
)
MEM = [sys.executable, "-m", "memcli"]
BATCH = 64  # RetainSettings.batch_items: the raw embedder gets the same batches
SENTENCES_PER_FACT = 2  # --components: sentence vectors a fact


def default_embedder_spec() -> str:
    """The model the `mem retain` processes use for a new store: MEM_EMBEDDER, else mem's
    default (models/choice.py), so the raw rate is the same model's."""
    from memcli.models.choice import DEFAULT_NAME

    return os.environ.get("MEM_EMBEDDER") or DEFAULT_NAME


def load_sentences(path: Path) -> list[dict]:
    """Distinct sentences of every distinct session, sessions in date order, as JSONL items."""
    from memcli.split import sentences

    data = json.loads(path.read_text())
    sessions: dict[str, tuple[datetime, list]] = {}
    for question in data:
        for sid, date, turns in zip(
            question["haystack_session_ids"],
            question["haystack_dates"],
            question["haystack_sessions"],
        ):
            if sid not in sessions:
                # "2023/05/28 (Sun) 16:07"
                when = datetime.strptime(date[:10] + date[-6:], "%Y/%m/%d %H:%M")
                sessions[sid] = (when, turns)
    seen: set[str] = set()
    items: list[dict] = []
    for sid, (when, turns) in sorted(sessions.items(), key=lambda kv: (kv[1][0], kv[0])):
        for t, turn in enumerate(turns):
            stamp = when + timedelta(minutes=t)
            for s, sentence in enumerate(sentences(turn["content"])):
                if sentence in seen:
                    continue
                seen.add(sentence)
                items.append(
                    {
                        "id": f"{sid}:{t}:{s}",
                        "text": sentence,
                        "context": turn["role"],
                        "timestamp": (stamp + timedelta(seconds=s)).isoformat(),
                        "document_id": sid,
                    }
                )
    return items


def load_queries(path: Path, n: int, rng: random.Random) -> list[tuple[str, str]]:
    """(question, its date as ISO) for n LongMemEval questions."""
    data = json.loads(path.read_text())
    picked = rng.sample(data, min(n, len(data)))
    out = []
    for q in picked:
        d = q["question_date"]
        when = datetime.strptime(d[:10] + d[-6:], "%Y/%m/%d %H:%M")
        out.append((q["question"], when.isoformat()))
    return out


def run_timed(cmd: list[str]) -> tuple[float, int, str, float]:
    """Run one process: (wall seconds, its own peak RSS in KB, stdout, CPU seconds: user +
    system, all threads). Fails loudly."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            message = err.read().decode()[-2000:]
            raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd[:8])}\n{message}")
        cpu = usage.ru_utime + usage.ru_stime
        return seconds, usage.ru_maxrss, out.read().decode(), cpu


def embedded_texts(items: list[dict]) -> list[str]:
    """The strings retain hands to the embedder for these items (same prepare, lead-ins)."""
    from memcli.ingest import item_from_json
    from memcli.retain import Retainer, embed_text, prepare_item
    from memcli.settings import RetainSettings

    settings = RetainSettings()
    retainer = Retainer(None, "default", None, settings=settings)  # only its lead-in logic
    texts: list[str] = []
    for start in range(0, len(items), BATCH):
        batch = [item_from_json(obj, {}) for obj in items[start : start + BATCH]]
        pending = [p for item in batch for p in prepare_item(item, retainer.now, settings)]
        for p, lead in zip(pending, retainer._lead_ins(pending)):
            texts.append(embed_text(p.text, p.item.context, p.span, p.entity_names, lead))
    return texts


def raw_embed_rate(
    embedder, items: list[dict], sample: int, rng: random.Random
) -> tuple[float, float]:
    """Items/s of the bare embedder on contiguous runs of these items' embedded strings:
    (per wall second, per CPU second of this process)."""
    if sample <= 0 or not items:
        return float("nan"), float("nan")
    # Contiguous windows keep lead-ins as retain makes them.
    windows = max(1, sample // 500)
    picked: list[dict] = []
    for _ in range(windows):
        start = rng.randrange(0, max(1, len(items) - 500))
        picked.extend(items[start : start + sample // windows])
    texts = embedded_texts(picked)
    t0 = time.perf_counter()
    c0 = time.process_time()
    for start in range(0, len(texts), BATCH):
        embedder.embed(texts[start : start + BATCH])
    per_item = len(picked) / len(texts)  # rates in items, like retain's facts per item
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return len(texts) / wall * per_item, len(texts) / cpu * per_item


def store_figures(db: Path | str) -> dict:
    from memcli.store.location import open_store

    with open_store(db) as store:
        store.checkpoint()
        facts = store.facts.fact_count()
        links = store.links.link_count()
        if isinstance(db, str):  # a database on a server: its own size, indexes included
            size = store.conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    if not isinstance(db, str):
        size = sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))
    return {"facts": facts, "links": links, "bytes": size}


def warm_in_process(db: Path | str, queries: list[tuple[str, str]]) -> dict:
    """Warm recall in this process (one connection, the model loaded, each query asked once
    before it is timed): p50 / p95 ms a query, as a library user or `mem mcp` sees it. For a
    PostgreSQL store every read goes over the server's local socket."""
    from memcli.models.load import load_embedder
    from memcli.recall.pipeline import recall
    from memcli.recall.types import RecallOptions
    from memcli.store.location import open_store

    times = []
    with open_store(db, create=False) as store:
        # The model the bank was made with (a store built with MiniLM or e5 alike).
        name = store.vectors.bank_embedder(store.banks.require_bank("default"))[0]
        embedder = load_embedder(name or default_embedder_spec())
        for query, now in queries:
            opts = RecallOptions(now=datetime.fromisoformat(now))
            recall(store, "default", query, opts, embedder=embedder)
        for query, now in queries:
            opts = RecallOptions(now=datetime.fromisoformat(now))
            t0 = time.perf_counter()
            recall(store, "default", query, opts, embedder=embedder)
            times.append((time.perf_counter() - t0) * 1000)
    return {"warm_p50_ms": statistics.median(times), "warm_p95_ms": percentile(times, 0.95)}


def batch_run(folder: Path, db: Path, queries: list[tuple[str, str]]) -> tuple[float, int, float]:
    """One `mem recall --batch` process over these queries: (wall s, peak RSS KB, CPU s)."""
    path = folder / f"batch{len(queries)}.jsonl"
    with open(path, "w") as fh:
        for i, (query, now) in enumerate(queries):
            fh.write(json.dumps({"id": i, "query": query, "now": now}) + "\n")
    seconds, rss, _, cpu = run_timed([*MEM, "--db", str(db), "recall", "--batch", str(path)])
    return seconds, rss, cpu


def _source_ids(db: Path | str) -> list[str]:
    from memcli.store.location import open_store

    with open_store(db) as store:
        return list(store.facts.source_ids(store.banks.require_bank("default")).values())


def components(items: list[dict], size: int, folder: Path) -> dict[str, float]:
    """CPU milliseconds of the vector machinery on a store of `size` facts: the real
    sentences with random unit vectors (no embedding, so 100k facts take a minute, not an
    hour; the search's cost does not depend on what the vectors say)."""
    import numpy as np

    from memcli.models.choice import DEFAULT_NAME
    from memcli.models.load import load_embedder
    from memcli.retain import semantic_link_floor
    from memcli.settings import RecallSettings
    from memcli.store import Store

    # The link search's cost depends on its floor (the Hamming reach): the default model's.
    link_floor = semantic_link_floor(load_embedder(DEFAULT_NAME))
    db = folder / f"components-{size}.db"
    for leftover in folder.glob(db.name + "*"):
        leftover.unlink()
    rng = np.random.default_rng(0)

    def unit() -> np.ndarray:
        v = rng.standard_normal(384).astype(np.float32)
        return v / np.linalg.norm(v)

    def cpu_ms(fn, repeat: int = 5) -> float:
        times = []
        for _ in range(repeat):
            c0 = time.process_time()
            fn()
            times.append((time.process_time() - c0) * 1000)
        return statistics.median(times)

    with Store(db) as store:
        with store.atomic():
            bank = store.banks.ensure_bank("default", datetime(2026, 1, 1))
            store.vectors.ensure_vectors(bank, "random-unit-vectors", None, 384)
            for i, obj in enumerate(items[:size]):
                store.facts.insert_fact(
                    bank_id=bank,
                    text=obj["text"],
                    context=obj["context"],
                    fact_type="experience" if i % 3 == 0 else "world",
                    mentioned_at=datetime.fromisoformat(obj["timestamp"]),
                    occurred_start=None,
                    occurred_end=None,
                    tags=[],
                    metadata={},
                    source_id=obj["id"],
                    document_id=None,
                    chunk_id=None,
                    content_hash=f"synthetic-{i}",
                    entity_names=[],
                    embedding=unit(),
                    now=datetime(2026, 1, 1),
                )
            # Sentence vectors as a bank of multi-sentence turns holds them (LoCoMo: 2.8 a
            # fact with two or more sentences of >= 10 words): SENTENCES_PER_FACT a fact.
            for fact_id in store.facts.fact_ids_of_bank(bank):
                store.vectors.add_sentence_vectors(
                    fact_id,
                    bank,
                    "world",
                    np.stack([unit() for _ in range(SENTENCES_PER_FACT)]),
                )
        ids = store.facts.fact_ids_of_bank(bank)
        top = max(ids)

        def fresh_scan() -> None:
            store.vectors.forget_scans()
            store.vectors._bank_scan(bank)

        def semantic_arm() -> None:
            vec = unit()
            for fact_type in ("world", "experience", "observation"):
                store.vectors.nearest(bank, vec, 300, (fact_type,))

        def link_batch() -> None:
            store.vectors.forget_scans()
            vectors = np.stack([unit() for _ in range(64)])
            new_ids = [top + 1 + i for i in range(64)]
            store.vectors.nearest_earlier([bank], new_ids, vectors, 50, set(), link_floor)

        def sentence_load() -> None:
            store.vectors.forget_scans()
            store.vectors._sentence_matrix(bank)

        def sentence_search() -> None:
            store.vectors.nearest_sentences(bank, unit(), RecallSettings().semantic_sentence_limit)

        window = ids[: len(ids) // 5]
        sample = ids[:: max(1, len(ids) // 100)][:100]
        return {
            "facts": len(ids),
            "scan_ms": cpu_ms(fresh_scan),
            "semantic_arm_ms": cpu_ms(semantic_arm),
            "sentence_load_ms": cpu_ms(sentence_load, 3),
            "sentence_search_ms": cpu_ms(sentence_search, 15),
            "sentence_mb": store.vectors._sentence_matrix(bank).nbytes / 1e6,
            "links_ms_per_fact": cpu_ms(link_batch, 3) / 64,
            "temporal_pool_ms": cpu_ms(
                lambda: store.vectors.nearest_among(bank, unit(), window, 60)
            ),
            "time_neighbours_ms": cpu_ms(
                lambda: [store.links.time_neighbours(i, 10, 168.0, 0.3) for i in sample], 3
            )
            / len(sample),
        }


def recall_figures(
    db: Path, folder: Path, queries: list[tuple[str, str]], cold_n: int, batch_n: int
) -> dict:
    """Cold recall (a whole process per query: p50 / p95 wall, p50 CPU), warm recall (a
    --batch of batch_n queries minus the same with one, per query) and the recall processes'
    peak RSS."""
    cold: list[float] = []
    cold_cpu: list[float] = []
    recall_rss = 0
    for query, now in queries[:cold_n]:
        seconds, rss, _, cpu = run_timed([*MEM, "--db", str(db), "recall", query, "--now", now])
        cold.append(seconds)
        cold_cpu.append(cpu)
        recall_rss = max(recall_rss, rss)
    one = []
    one_cpu = []
    for _ in range(3):
        seconds, rss, cpu = batch_run(folder, db, queries[:1])
        one.append(seconds)
        one_cpu.append(cpu)
        recall_rss = max(recall_rss, rss)
    many, rss, many_cpu = batch_run(folder, db, queries[:batch_n])
    recall_rss = max(recall_rss, rss)
    return {
        **warm_in_process(db, queries[:batch_n]),
        "cold_p50": statistics.median(cold),
        "cold_p95": percentile(cold, 0.95),
        "cold_cpu_p50": statistics.median(cold_cpu),
        "warm_ms": (many - statistics.median(one)) / (batch_n - 1) * 1000,
        "warm_cpu_ms": (many_cpu - statistics.median(one_cpu)) / (batch_n - 1) * 1000,
        "recall_rss_mb": recall_rss / 1024,
    }


def measure_only(dbs: list[Path], queries: list[tuple[str, str]], args) -> None:
    """Recall figures of stores built earlier (by --keep), with the code checked out now."""
    print(f"# {os.cpu_count()} cpus, load {os.getloadavg()}", flush=True)
    print(
        f"{'facts':>7} {'cold p50 s':>10} {'cold p95 s':>10} {'cold cpu s':>10} "
        f"{'warm ms/q':>9} {'warm cpu ms':>11} {'KB/fact':>7} {'links/f':>7} {'RSS MB':>6}  store"
    )
    for db in dbs:
        with tempfile.TemporaryDirectory() as tmp:
            figures = store_figures(db)
            r = recall_figures(db, Path(tmp), queries, args.queries, args.batch_queries)
        print(
            f"{figures['facts']:>7} {r['cold_p50']:>10.2f} {r['cold_p95']:>10.2f} "
            f"{r['cold_cpu_p50']:>10.2f} {r['warm_ms']:>9.1f} {r['warm_cpu_ms']:>11.1f} "
            f"{figures['bytes'] / 1024 / figures['facts']:>7.2f} "
            f"{figures['links'] / figures['facts']:>7.1f} {r['recall_rss_mb']:>6.0f}  {db}",
            flush=True,
        )


def retain_into(dbs: list[Path], items: list[dict], count: int, repeat: int) -> None:
    """Flatness in one run: the same `count` new items (whole sessions from the end of the
    text, in none of the stores) retained by one `mem retain --jsonl` process into a copy of
    each store, `repeat` rounds, beside the raw embedder on the same strings in this
    process. Facts per CPU second, medians over the rounds."""
    from memcli.models.load import load_embedder

    start = len(items) - count
    while 0 < start < len(items) and items[start]["document_id"] == items[start - 1]["document_id"]:
        start += 1
    chosen = items[start:]
    embedder = load_embedder(default_embedder_spec())
    texts = embedded_texts(chosen)
    per_item = len(chosen) / len(texts)
    print(
        f"# {len(chosen)} items ({items[start]['id']} on), {os.cpu_count()} cpus, "
        f"load {os.getloadavg()}",
        flush=True,
    )
    raw: list[float] = []
    rates: dict[Path, list[float]] = {db: [] for db in dbs}
    sizes: dict[Path, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "new.jsonl"
        path.write_text("".join(json.dumps(obj) + "\n" for obj in chosen))
        for _ in range(repeat):
            c0 = time.process_time()
            for first in range(0, len(texts), BATCH):
                embedder.embed(texts[first : first + BATCH])
            raw.append(len(texts) / (time.process_time() - c0) * per_item)
            for db in dbs:
                copy = folder / "copy.db"
                for leftover in folder.glob("copy.db*"):
                    leftover.unlink()
                shutil.copyfile(db, copy)
                before = store_figures(copy)["facts"]
                _, _, _, cpu = run_timed([*MEM, "--db", str(copy), "retain", "--jsonl", str(path)])
                new = store_figures(copy)["facts"] - before
                sizes[db] = before
                rates[db].append(new / cpu)
    raw_rate = statistics.median(raw)
    print(
        f"raw embedder: {raw_rate:.1f} items/cpu-s (rounds: {', '.join(f'{r:.1f}' for r in raw)})"
    )
    print(f"{'store facts':>11} {'retain f/cpu-s':>14} {'ratio':>6}  rounds")
    for db in dbs:
        rate = statistics.median(rates[db])
        rounds = ", ".join(f"{r:.1f}" for r in rates[db])
        print(f"{sizes[db]:>11} {rate:>14.1f} {rate / raw_rate:>6.2f}  {rounds}", flush=True)


def check_links(db: Path, sample: int, rng: random.Random) -> None:
    """How many of retain's semantic links the link search finds, on a real store: for
    `sample` of its facts (as if each were new), the exact answer (cosine over every
    earlier fact's float vector, top semantic_link_top at or above the floor) against
    nearest_earlier as it runs (candidates within hamming_reach of the new fact) and with
    every distance allowed; CPU ms per fact of each (one fact per search here; retain
    searches 64 at a time and reads their floats once)."""
    from types import SimpleNamespace

    import numpy as np

    from memcli.retain import semantic_link_floor
    from memcli.settings import RetainSettings
    from memcli.store import Store
    from memcli.store import vectors as vec_mod

    s = RetainSettings()
    with Store(db) as store:
        bank = store.banks.require_bank("default")
        model_name = store.vectors.bank_embedder(bank)[0]
        k = s.semantic_link_top
        floor = semantic_link_floor(SimpleNamespace(name=model_name), s)
        ids, vectors = store.vectors.bank_vectors(bank)
        order = np.argsort(ids)
        ids, vectors = ids[order], vectors[order]
        picked = sorted(rng.sample(range(len(ids) // 10, len(ids)), sample))
        exact: list[set[int]] = []
        for i in picked:
            cos = vectors[:i] @ vectors[i]
            top = np.argsort(-cos)[:k]
            exact.append({int(ids[j]) for j in top if cos[j] >= floor})
        results = {}
        full_reach = vec_mod.hamming_reach
        for name, reach in (
            ("within hamming_reach", full_reach),
            ("every distance", lambda dim, floor: dim),
        ):
            vec_mod.hamming_reach = reach
            store.vectors.forget_scans()  # each variant reads its floats itself
            store.vectors.prepare_vector_search(bank)
            try:
                found: list[set[int]] = []
                c0 = time.process_time()
                for i in picked:  # one fact at a time, each with only earlier facts
                    got = store.vectors.nearest_earlier(
                        [bank], [int(ids[i])], vectors[i : i + 1], k, set(), floor
                    )
                    found.append({f for f, _ in got[0]})
                cpu_ms = (time.process_time() - c0) * 1000 / len(picked)
            finally:
                vec_mod.hamming_reach = full_reach
            hits = sum(len(e & f) for e, f in zip(exact, found))
            results[name] = (hits / max(1, sum(len(e) for e in exact)), cpu_ms)
    total = sum(len(e) for e in exact)
    print(
        f"# {db}: {len(ids)} facts, {sample} facts as new, "
        f"{total} exact links ({total / sample:.1f} a fact)"
    )
    for name, (recall, cpu_ms) in results.items():
        print(f"{name:>20}: {recall:.4f} of the exact links, {cpu_ms:.2f} CPU ms a fact")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,30000,100000")
    parser.add_argument(
        "--imports-per-size",
        default="2,2,4",
        help="imports that grow the store to each size (last value repeats)",
    )
    parser.add_argument("--queries", type=int, default=20, help="cold recall processes per size")
    parser.add_argument("--batch-queries", type=int, default=40, help="queries in the warm batch")
    parser.add_argument("--raw-sample", type=int, default=1500, help="items for the raw embedder")
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--keep", type=Path, help="build the store in this folder and keep it")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--components",
        help="instead: CPU ms of the vector search at these sizes (random vectors), e.g. "
        "10000,100000",
    )
    parser.add_argument(
        "--measure",
        nargs="+",
        type=Path,
        metavar="DB",
        help="instead: only the recall figures of these stores (e.g. the scale-N.db copies "
        "that --keep leaves), with the code checked out now",
    )
    parser.add_argument(
        "--retain-into",
        nargs="+",
        type=Path,
        metavar="DB",
        help="instead: retain the same --retain-items new items into a copy of each store "
        "(flatness in one run)",
    )
    parser.add_argument("--retain-items", type=int, default=1000)
    parser.add_argument(
        "--store",
        help="grow a store at this postgresql:// URL (an empty database) instead of a file",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --retain-into")
    parser.add_argument(
        "--check-links",
        type=Path,
        metavar="DB",
        help="instead: how many exact semantic links the link search finds on this store",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the store in --keep and grow it from where it is (sizes it holds skipped)",
    )
    args = parser.parse_args()
    compileall.compile_dir(ROOT / "memcli", quiet=1)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

    sizes = [int(s) for s in args.sizes.split(",")]
    per_size = [int(s) for s in args.imports_per_size.split(",")]
    rng = random.Random(args.seed)
    items = load_sentences(args.dataset)
    if sizes[-1] > len(items):
        raise SystemExit(f"only {len(items)} distinct sentences; largest size {sizes[-1]}")
    if args.components:
        folder = args.keep or Path(tempfile.mkdtemp(prefix="mem-scale-"))
        folder.mkdir(parents=True, exist_ok=True)
        print(
            f"{'facts':>7} {'scan':>6} {'semantic arm':>12} {'links/fact':>10} "
            f"{'temporal pool':>13} {'time nbrs':>9} {'sent. load':>10} {'sent. search':>12} "
            f"{'sent. MB':>8}   (CPU ms; {SENTENCES_PER_FACT} sentence vectors a fact)"
        )
        for size in (int(s) for s in args.components.split(",")):
            r = components(items, size, folder)
            print(
                f"{r['facts']:>7} {r['scan_ms']:>6.1f} {r['semantic_arm_ms']:>12.1f} "
                f"{r['links_ms_per_fact']:>10.2f} {r['temporal_pool_ms']:>13.1f} "
                f"{r['time_neighbours_ms']:>9.3f} {r['sentence_load_ms']:>10.1f} "
                f"{r['sentence_search_ms']:>12.1f} {r['sentence_mb']:>8.1f}",
                flush=True,
            )
        return
    if args.check_links:
        check_links(args.check_links, 300, rng)
        return
    if args.retain_into:
        retain_into(args.retain_into, items, args.retain_items, args.rounds)
        return
    queries = load_queries(args.dataset, max(args.queries, args.batch_queries), rng)
    if args.measure:
        measure_only(args.measure, queries, args)
        return

    from memcli.models.load import load_embedder

    embedder = load_embedder(default_embedder_spec())
    embedder.embed(["warm up"])

    folder = args.keep or Path(tempfile.mkdtemp(prefix="mem-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    db: Path | str = folder / "scale.db"
    if args.store:
        from memcli.store.location import StoreURL

        db = StoreURL(args.store)
    elif not (args.resume and db.exists()):
        for leftover in folder.glob("scale.db*"):
            leftover.unlink()
    env_note = f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load {os.getloadavg()}"
    from memcli.store.location import shown

    print(f"# {len(items)} distinct sentences; store {shown(db)}; {env_note}", flush=True)

    def whole_sessions(end: int) -> int:
        """The first index at or after end that starts a new session: an import holds
        whole sessions (a later import of the same document would replace it)."""
        while 0 < end < len(items) and items[end]["document_id"] == items[end - 1]["document_id"]:
            end += 1
        return end

    rows = []
    done = 0
    if args.resume and db.exists():
        have = set(_source_ids(db))
        while done < len(items) and items[done]["id"] in have:
            done += 1
        print(f"# resuming: the store holds the first {done} items", flush=True)
    for index, size in enumerate(sizes):
        imports = per_size[min(index, len(per_size) - 1)]
        size = whole_sessions(size)
        if size <= done:
            continue
        segment = items[done:size]
        bounds = [
            whole_sessions(done + round(i * len(segment) / imports)) - done
            for i in range(imports + 1)
        ]
        retain_s = 0.0
        retain_cpu = 0.0
        retain_rss = 0
        load_before = os.getloadavg()[0]
        facts_before = store_figures(db)["facts"] if db.exists() else 0
        for a, b in zip(bounds, bounds[1:]):
            if b <= a:
                continue
            path = folder / "import.jsonl"
            with open(path, "w") as fh:
                for obj in segment[a:b]:
                    fh.write(json.dumps(obj) + "\n")
            cmd = [*MEM, "--db", str(db), "retain", "--jsonl", str(path)]
            seconds, rss, _, cpu = run_timed(cmd)
            retain_s += seconds
            retain_cpu += cpu
            retain_rss = max(retain_rss, rss)
            print(f"  import {done + a}..{done + b}: {seconds:.1f}s", file=sys.stderr, flush=True)
        figures = store_figures(db)
        new_facts = figures["facts"] - facts_before
        retain_rate = new_facts / retain_s
        raw_rate, raw_cpu_rate = raw_embed_rate(embedder, segment, args.raw_sample, rng)
        done = size

        recall = recall_figures(db, folder, queries, args.queries, args.batch_queries)
        row = {
            "size": size,
            "facts": figures["facts"],
            "imports": imports,
            "retain_fps": retain_rate,
            "raw_fps": raw_rate,
            "ratio": retain_rate / raw_rate,
            "retain_fps_cpu": new_facts / retain_cpu,
            "raw_fps_cpu": raw_cpu_rate,
            "ratio_cpu": new_facts / retain_cpu / raw_cpu_rate,
            **recall,
            "load": (load_before, os.getloadavg()[0]),
            "kb_per_fact": figures["bytes"] / 1024 / figures["facts"],
            "links_per_fact": figures["links"] / figures["facts"],
            "retain_rss_mb": retain_rss / 1024,
        }
        rows.append(row)
        if args.keep and not args.store:
            # A copy at each size, so later code can be measured on the same stores (--measure).
            shutil.copyfile(db, folder / f"scale-{size}.db")
        print(json.dumps(row), file=sys.stderr, flush=True)

    print(
        f"{'size':>7} {'facts':>7} {'retain f/s':>10} {'raw f/s':>8} {'ratio':>6} "
        f"{'cold p50 s':>10} {'cold p95 s':>10} {'warm ms/q':>9} {'warm p50':>8} "
        f"{'warm p95':>8} {'KB/fact':>7} {'links/f':>7} {'RSS ret MB':>10} {'RSS rec MB':>10}"
    )
    for r in rows:
        print(
            f"{r['size']:>7} {r['facts']:>7} {r['retain_fps']:>10.1f} "
            f"{r['raw_fps']:>8.1f} {r['ratio']:>6.2f} {r['cold_p50']:>10.2f} "
            f"{r['cold_p95']:>10.2f} {r['warm_ms']:>9.1f} {r['warm_p50_ms']:>8.1f} "
            f"{r['warm_p95_ms']:>8.1f} {r['kb_per_fact']:>7.2f} "
            f"{r['links_per_fact']:>7.1f} {r['retain_rss_mb']:>10.0f} {r['recall_rss_mb']:>10.0f}"
        )
    print("per CPU second (user + system of the processes; the same figures on a busy machine):")
    print(
        f"{'size':>7} {'retain f/cpu-s':>14} {'raw f/cpu-s':>11} {'ratio':>6} "
        f"{'cold cpu p50 s':>14} {'warm cpu ms/q':>13} {'load avg':>13}"
    )
    for r in rows:
        load = f"{r['load'][0]:.1f}..{r['load'][1]:.1f}"
        print(
            f"{r['size']:>7} {r['retain_fps_cpu']:>14.1f} {r['raw_fps_cpu']:>11.1f} "
            f"{r['ratio_cpu']:>6.2f} {r['cold_cpu_p50']:>14.2f} {r['warm_cpu_ms']:>13.1f} "
            f"{load:>13}"
        )


if __name__ == "__main__":
    main()
