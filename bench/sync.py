"""`mem sync` speed: a folder of 2,000 Markdown notes made from real text.

    python bench/sync.py [--notes 2000] [--watch-edits 15] [--datasets ../shared/datasets]

The notes are built in a temp folder from LongMemEval-S (read by path from the datasets
folder, never copied into the repo): one note per chat session, its date in the front
matter, a heading and the session's first two user turns (each cut to 60 words) as
paragraphs. Prints:
- the first sync (the `mem sync` command, model load included): items and facts per second,
  against the raw embedder embedding the same facts' texts in this process (64 a call, as
  retain batches them), measured before and after the sync, and their ratio;
- a sync with nothing changed, then with 1% and 5% of the files edited: seconds, and the
  seconds per changed file against the first sync's seconds per file;
- `mem sync --watch`: the time from a file's edit to its new text in the store, p50 / p90.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw

MEM = str(Path(sys.executable).with_name("mem"))
BATCH = 64


def sessions(datasets: Path) -> list[tuple[str, str, list[str]]]:
    """(session id, date, user turns) of LongMemEval-S, each session once, by id."""
    seen: dict[str, tuple[str, list[str]]] = {}
    with open(datasets / "longmemeval-s-dev.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            for sid, date, turns in zip(
                q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"]
            ):
                user = [t["content"] for t in turns if t["role"] == "user" and t["content"].strip()]
                if user:
                    seen.setdefault(sid, (date, user))
    return [(sid, *seen[sid]) for sid in sorted(seen)]


def cut(text: str, words: int = 60) -> str:
    return " ".join(text.split()[:words])


def note_text(sid: str, date: str, turns: list[str], extra: str = "") -> str:
    day = re.match(r"(\d{4})/(\d{2})/(\d{2})", date)
    iso = f"{day[1]}-{day[2]}-{day[3]}" if day else "2023-01-01"
    body = "\n\n".join(cut(t) for t in turns[:2])
    return (
        f"---\ntitle: Chat {sid}\ndate: {iso}\ntags: [chat]\n---\n# Asked on {iso}\n\n{body}\n"
        + (f"\n{extra}\n" if extra else "")
    )


def run(args: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run([MEM, *args], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"mem {' '.join(args)} failed: {done.stderr}")
    return seconds, done.stderr.strip()


def raw_rate(texts: list[str]) -> float:
    from memcli.models.load import load_embedder

    model = load_embedder()
    model.embed(["warm up"])
    t0 = time.perf_counter()
    for i in range(0, len(texts), BATCH):
        model.embed(texts[i : i + BATCH])
    return len(texts) / (time.perf_counter() - t0)


def count(db: Path, marker: str) -> int:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute(
            "SELECT count(*) FROM facts f JOIN banks b ON b.id = f.bank_id "
            "WHERE b.kind = 'user' AND instr(f.text, ?) > 0",
            (marker,),
        ).fetchone()[0]
    finally:
        conn.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--watch-edits", type=int, default=15)
    parser.add_argument("--datasets", default=os.environ.get("MEM_DATASETS", "../shared/datasets"))
    args = parser.parse_args()
    chats = sessions(Path(args.datasets))[: args.notes]
    if len(chats) < args.notes:
        raise SystemExit(f"only {len(chats)} sessions in the dataset")
    rng = random.Random(34)
    spare = [
        cut(t, 25) for _, _, turns in sessions(Path(args.datasets))[args.notes :] for t in turns
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root, db = Path(tmp) / "vault", Path(tmp) / "mem.db"
        paths = []
        for i, (sid, date, turns) in enumerate(chats):
            path = root / f"{i % 20:02d}" / f"{sid}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(note_text(sid, date, turns), encoding="utf-8")
            paths.append((path, sid, date, turns))
        print(f"{len(paths)} notes from LongMemEval-S sessions in {root}")

        seconds, summary = run(["--db", str(db), "sync", str(root)])
        texts = [
            json.loads(line)["text"]
            for line in subprocess.run(
                [MEM, "--db", str(db), "list", "--format", "jsonl"], capture_output=True, text=True
            ).stdout.splitlines()
        ]
        facts = len(texts)
        raw_before = raw_rate(texts)
        raw_after = raw_rate(texts)
        raw = (raw_before + raw_after) / 2
        own = float(re.search(r"([\d.]+)s\)$", summary)[1])
        print(f"first sync: {summary}")
        print(
            f"  {seconds:.1f} s wall ({own:.1f} s in the sync itself): {len(paths) / seconds:.1f} "
            f"files/s, {facts / seconds:.1f} facts/s ({facts / own:.1f} facts/s without start "
            f"and model load)"
        )
        print(
            f"  raw embedder on the same {facts} texts: {raw:.1f} texts/s (before "
            f"{raw_before:.1f}, after {raw_after:.1f}); sync/raw = "
            f"{facts / seconds / raw:.2f} wall, {facts / own / raw:.2f} in the sync"
        )

        per_file_first = seconds / len(paths)
        rows = []
        for share in (0.0, 0.01, 0.05):
            changed = rng.sample(paths, int(len(paths) * share))
            for path, sid, date, turns in changed:
                path.write_text(note_text(sid, date, turns, rng.choice(spare)), encoding="utf-8")
            took, summary = run(["--db", str(db), "sync", str(root)])
            rows.append((share, len(changed), took, summary))
        print("second syncs (wall, model load included when something changed):")
        for share, n, took, summary in rows:
            per = f", {took / n:.3f} s per changed file" if n else ""
            print(f"  {share:>4.0%} changed ({n:>3} files): {took:6.2f} s{per}   [{summary}]")
        print(f"  first sync: {per_file_first:.3f} s per file")

        proc = subprocess.Popen(
            [MEM, "--db", str(db), "sync", str(root), "--watch"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            line = proc.stderr.readline()
            while line and "watching" not in line:
                line = proc.stderr.readline()
            time.sleep(1.0)
            latencies = []
            for k in range(args.watch_edits):
                path, sid, date, turns = rng.choice(paths)
                marker = f"watch edit number {k} of this run"
                t0 = time.perf_counter()
                path.write_text(note_text(sid, date, turns, f"{marker}."), encoding="utf-8")
                while count(db, marker) == 0:
                    if time.perf_counter() - t0 > 60:
                        raise SystemExit("the watcher did not take the edit in 60 s")
                    time.sleep(0.005)
                latencies.append(time.perf_counter() - t0)
                time.sleep(0.3)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
        print(
            f"--watch reaction (edit -> new text in the store), {len(latencies)} edits: "
            f"p50 {statistics.median(latencies) * 1000:.0f} ms, "
            f"p90 {percentile(latencies, 0.9) * 1000:.0f} ms, "
            f"min {min(latencies) * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
