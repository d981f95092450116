"""Lifecycle benchmark: time and peak RSS of export, import, list and reembed on a real store.

    python bench/lifecycle.py --db STORE [--runs 3] [--slow-runs 1] [--work DIR]
    python bench/lifecycle.py --grow SMALL --copies 10 --db BIG   # then measure BIG

STORE is any mem store (e.g. one grown by bench/scale.py --keep DIR, or `mem retain --jsonl`
of LongMemEval sentences). Each figure is one `mem` process (python -m memcli), its wall time
and its own peak RSS (os.wait4's ru_maxrss), the median of --runs runs; import without
vectors and reembed embed every fact again and run --slow-runs times. The round trip is
checked too: export, import into a fresh file, export again must give the same bytes.

--grow builds a bigger store cheaply from a real one: SMALL's export with vectors, written
--copies times under new ids (documents and content hashes made distinct per copy), imported
into BIG (which must not exist). Its facts are real text, repeated; retain is not involved.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEM = [sys.executable, "-m", "memcli"]


def grow(small: Path, copies: int, big: Path, work: Path) -> None:
    """Write SMALL's export `copies` times under shifted ids and import it into BIG."""
    import hashlib
    import json

    if big.exists():
        raise SystemExit(f"{big} exists; --grow writes a new store")
    dump = work / "small.jsonl"
    run(["--db", str(small), "export", "--with-vectors", "-o", str(dump)])
    lines = dump.read_text().splitlines()
    header = json.loads(lines[0])
    span = {t: (r[1] + 1 if r else 0) for t, r in header["ids"].items()}
    header["ids"] = {
        t: ([r[0], r[1] + (copies - 1) * span[t]] if r else None) for t, r in header["ids"].items()
    }
    header["counts"] = {k: v * copies for k, v in header["counts"].items()}
    body = [json.loads(x) for x in lines[1:-1]]
    out = work / "big.jsonl"
    with open(out, "w") as fh:
        fh.write(json.dumps(header, separators=(",", ":")) + "\n")
        for kind in ("document", "chunk", "entity", "fact", "link"):
            for k in range(copies):
                d, c, e, f = (k * span[t] for t in ("documents", "chunks", "entities", "facts"))
                for rec in body:
                    if rec["kind"] != kind:
                        continue
                    r = dict(rec)
                    if kind == "document":
                        r["id"] += d
                        r["external_id"] += f"#{k}" if k else ""
                    elif kind == "chunk":
                        r["id"] += c
                        r["document_id"] = r["document_id"] and r["document_id"] + d
                    elif kind == "entity":
                        r["id"] += e
                    elif kind == "fact":
                        r["id"] += f
                        r["document_id"] = r["document_id"] and r["document_id"] + d
                        r["chunk_id"] = r["chunk_id"] and r["chunk_id"] + c
                        r["superseded_by"] = r["superseded_by"] and r["superseded_by"] + f
                        r["entities"] = [x + e for x in r["entities"]]
                        if k:
                            r["content_hash"] = hashlib.sha256(
                                f"{r['content_hash']}:{k}".encode()
                            ).hexdigest()
                    else:
                        r["from"] += f
                        r["to"] += f
                    fh.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
        fh.write(json.dumps({"kind": "end", "counts": header["counts"]}) + "\n")
    seconds, rss = run(["--db", str(big), "import", str(out)])
    print(f"grew {big}: {header['counts']['facts']} facts in {seconds:.1f}s, peak RSS {rss:.0f} MB")


def run(args: list[str], stdout: Path | None = None) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one mem process."""
    out = open(stdout, "wb") if stdout else subprocess.DEVNULL
    try:
        started = time.perf_counter()
        proc = subprocess.Popen([*MEM, *args], stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        err = proc.stderr.read().decode() if proc.stderr else ""
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if stdout:
            out.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {err.strip()}")
    return seconds, usage.ru_maxrss / 1024


def measure(label: str, runs: int, make_args, stdout=None) -> None:
    if runs <= 0:
        print(f"{label:<34} skipped (--slow-runs 0)")
        return
    times, rss = [], []
    for i in range(runs):
        args = make_args(i)
        s, m = run(args, stdout)
        times.append(s)
        rss.append(m)
    print(
        f"{label:<34} {statistics.median(times):7.2f} s  (runs: "
        f"{', '.join(f'{t:.2f}' for t in times)})   peak RSS {max(rss):6.0f} MB",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--bank", default="default")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--slow-runs", type=int, default=1)
    parser.add_argument("--work", type=Path, help="folder for the files (default: a temp dir)")
    parser.add_argument("--grow", type=Path, help="build --db from this store (see above)")
    parser.add_argument("--copies", type=int, default=10)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="mem-lifecycle-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.grow:
        grow(args.grow, args.copies, args.db, work)
        return
    db, bank = str(args.db), args.bank
    plain, vectors = work / "export.jsonl", work / "export-vectors.jsonl"

    run(["--db", db, "--bank", bank, "banks"])  # warm the OS cache and the model cache
    print(f"store {db} ({os.path.getsize(db) / 1e6:.0f} MB), bank {bank!r}")
    measure(
        "list (all, text) > /dev/null", args.runs, lambda i: ["--db", db, "--bank", bank, "list"]
    )
    measure("export", args.runs, lambda i: ["--db", db, "--bank", bank, "export", "-o", str(plain)])
    measure(
        "export --with-vectors",
        args.runs,
        lambda i: ["--db", db, "--bank", bank, "export", "--with-vectors", "-o", str(vectors)],
    )
    print(
        f"files: {plain.stat().st_size / 1e6:.1f} MB, with vectors "
        f"{vectors.stat().st_size / 1e6:.1f} MB"
    )

    def fresh(tag: str, i: int) -> str:
        path = work / f"{tag}-{i}.db"
        for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            p.unlink(missing_ok=True)
        return str(path)

    measure(
        "import (vectors from the file)",
        args.runs,
        lambda i: ["--db", fresh("iv", i), "import", str(vectors)],
    )
    again = work / "again.jsonl"
    run(
        [
            "--db",
            str(work / "iv-0.db"),
            "--bank",
            bank,
            "export",
            "--with-vectors",
            "-o",
            str(again),
        ]
    )
    same = again.read_bytes() == vectors.read_bytes()
    print(f"round trip (with vectors) byte-identical: {same}")
    measure(
        "import (embeds every fact)",
        args.slow_runs,
        lambda i: ["--db", fresh("ie", i), "import", str(plain)],
    )
    if args.slow_runs > 0:
        run(["--db", str(work / "ie-0.db"), "--bank", bank, "export", "-o", str(again)])
        same = again.read_bytes() == plain.read_bytes()
        print(f"round trip (re-embedded) byte-identical: {same}")
    measure(
        "reembed (same model)",
        args.slow_runs,
        lambda i: ["--db", str(work / "iv-0.db"), "--bank", bank, "reembed"],
    )


if __name__ == "__main__":
    main()
