"""LoCoMo through the command line only, as the held-out runs of issue 35 measure it.

    python bench/cli_harness.py ../shared/datasets/locomo-dev.json --work /tmp/harness
                                [--speakers context|text] [--now last|none]

`mem bench` retains and recalls in process; the held-out figures come from `mem retain
--jsonl` and `mem recall --batch --format json` alone, scored on what recall printed. This
does the same: per conversation a new store, its turns as JSONL ({"id", "text", "timestamp",
and "context" with --speakers context, else "Caroline: ..." in the text), then every question
in one `--batch` (with --now last, each asked at the conversation's last turn, as `mem bench`
asks them; with none, at the machine's clock). Scores: R@10 and MRR over the printed
results' distinct source ids (the turns' dia_ids), and the share of category 5 questions
(unanswerable) that printed nothing. The stores and files stay in --work.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from memcli.bench.datasets import read_locomo

MEM = [sys.executable, "-m", "memcli"]


def run(args: list[str]) -> str:
    done = subprocess.run([*MEM, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"mem {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo", type=Path)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--speakers", choices=("context", "text"), default="context")
    parser.add_argument("--now", choices=("last", "none"), default="last")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    recall_at_10: list[float] = []
    reciprocal: list[float] = []
    emptied: list[bool] = []
    for case in read_locomo(args.locomo):
        folder = args.work / f"{case.id}-{args.speakers}"
        folder.mkdir(exist_ok=True)
        db = folder / "mem.db"
        if not db.exists():
            with (folder / "items.jsonl").open("w", encoding="utf-8") as out:
                for item in case.items:
                    row = {"id": item.id, "timestamp": item.timestamp.isoformat() + "Z"}
                    if args.speakers == "context":
                        row.update(text=item.text, context=item.context)
                    else:
                        row["text"] = f"{item.context}: {item.text}"
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
            run(["--db", str(db), "retain", "--jsonl", str(folder / "items.jsonl")])
        last = max(item.timestamp for item in case.items).isoformat() + "Z"
        asked = [q for q in case.questions if q.unanswerable or q.gold_ids]
        with (folder / f"batch-{args.now}.jsonl").open("w", encoding="utf-8") as out:
            for q in asked:
                request = {"id": q.id, "query": q.query}
                if args.now == "last":
                    request["now"] = last
                out.write(json.dumps(request, ensure_ascii=False) + "\n")
        lines = run(
            ["--db", str(db), "recall", "--batch", str(folder / f"batch-{args.now}.jsonl")]
            + ["--format", "json"]
        ).splitlines()
        printed = {obj["id"]: obj for obj in map(json.loads, lines)}
        for q in asked:
            sources = list(dict.fromkeys(r["source_id"] for r in printed[q.id]["results"]))
            if q.unanswerable:
                emptied.append(not sources)
                continue
            gold = set(q.gold_ids)
            recall_at_10.append(len(gold & set(sources[:10])) / len(gold))
            rank = next((i + 1 for i, s in enumerate(sources) if s in gold), None)
            reciprocal.append(1 / rank if rank else 0.0)
    print(
        f"speakers in {args.speakers}, now {args.now}: {len(recall_at_10)} questions, "
        f"R@10 {statistics.fmean(recall_at_10):.3f}, MRR {statistics.fmean(reciprocal):.3f}; "
        f"unanswerable emptied {sum(emptied)}/{len(emptied)}"
    )


if __name__ == "__main__":
    main()
