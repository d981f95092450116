"""LoCoMo or LongMemEval S through the command line only, as the held-out runs of issue 35
measure them.

    python bench/cli_harness.py ../shared/datasets/locomo-dev.json --work /tmp/harness
                                [--speakers context|text] [--now last|none]
    python bench/cli_harness.py ../shared/datasets/longmemeval-s-dev.jsonl --work /tmp/harness
                                [--documents yes|no] [--cases N]

`mem bench` retains and recalls in process; the held-out figures come from `mem retain
--jsonl` and `mem recall --batch --format json` alone, scored on what recall printed. This
does the same: per case (a LoCoMo conversation, a LongMemEval question) a new store, its
turns as JSONL ({"id", "text", "timestamp"}; LoCoMo: "context" with --speakers context, else
"Caroline: ..." in the text; LongMemEval: "document_id" the session with --documents yes),
then its questions in one `--batch` (LoCoMo with --now last at the conversation's last turn,
as `mem bench` asks them, with none at the machine's clock; LongMemEval at its question
date). Scores over the printed results' distinct source ids: LoCoMo R@10 and MRR of the
turns; LongMemEval R@5, hit@5 and MRR of their sessions; and the unanswerable questions
(LoCoMo category 5, LongMemEval `_abs`) that printed nothing. Stores stay in --work.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from memcli.bench.datasets import iter_dataset

MEM = [sys.executable, "-m", "memcli"]


def run(args: list[str]) -> str:
    done = subprocess.run([*MEM, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"mem {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--speakers", choices=("context", "text"), default="context")
    parser.add_argument("--now", choices=("last", "none"), default="last")
    parser.add_argument("--documents", choices=("yes", "no"), default="yes")
    parser.add_argument("--cases", type=int, help="only the first N cases (as mem bench --limit)")
    args = parser.parse_args()
    lme = args.dataset.suffix == ".jsonl"
    variant = f"docs-{args.documents}" if lme else args.speakers
    k = 5 if lme else 10
    args.work.mkdir(parents=True, exist_ok=True)
    recall_at_k: list[float] = []
    hit_at_k: list[float] = []
    reciprocal: list[float] = []
    emptied: list[bool] = []
    for number, case in enumerate(iter_dataset(args.dataset, "lme" if lme else "locomo")):
        if args.cases is not None and number >= args.cases:
            break
        folder = args.work / f"{case.id}-{variant}"
        folder.mkdir(exist_ok=True)
        db = folder / "mem.db"
        if not (folder / "retained").exists():
            db.unlink(missing_ok=True)
            with (folder / "items.jsonl").open("w", encoding="utf-8") as out:
                for item in case.items:
                    row = {"id": item.id, "timestamp": item.timestamp.isoformat() + "Z"}
                    if lme:
                        row["text"] = item.text
                        if args.documents == "yes":
                            row["document_id"] = item.document_id
                    elif args.speakers == "context":
                        row.update(text=item.text, context=item.context)
                    else:
                        row["text"] = f"{item.context}: {item.text}"
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
            run(["--db", str(db), "retain", "--jsonl", str(folder / "items.jsonl")])
            (folder / "retained").touch()
        last = max(item.timestamp for item in case.items).isoformat() + "Z"
        session_of = {item.id: item.session_id for item in case.items}
        asked = [q for q in case.questions if q.unanswerable or q.gold_ids or q.gold_sessions]
        batch = folder / f"batch-{args.now}.jsonl"
        with batch.open("w", encoding="utf-8") as out:
            for q in asked:
                request = {"id": q.id, "query": q.query}
                if q.now is not None:
                    request["now"] = q.now.isoformat() + "Z"
                elif args.now == "last":
                    request["now"] = last
                out.write(json.dumps(request, ensure_ascii=False) + "\n")
        lines = run(["--db", str(db), "recall", "--batch", str(batch), "--format", "json"])
        printed = {obj["id"]: obj for obj in map(json.loads, lines.splitlines())}
        for q in asked:
            shown = [r["source_id"] for r in printed[q.id]["results"]]
            if q.unanswerable:
                emptied.append(not shown)
                continue
            keys = [session_of.get(s) for s in shown] if lme else shown
            keys = list(dict.fromkeys(keys))
            gold = set(q.gold_sessions) if lme else set(q.gold_ids)
            recall_at_k.append(len(gold & set(keys[:k])) / len(gold))
            hit_at_k.append(float(bool(gold & set(keys[:k]))))
            rank = next((i + 1 for i, key in enumerate(keys) if key in gold), None)
            reciprocal.append(1 / rank if rank else 0.0)
    print(
        f"{args.dataset.name}, {variant}, now {args.now}: {len(recall_at_k)} questions, "
        f"R@{k} {statistics.fmean(recall_at_k):.3f}, hit@{k} {statistics.fmean(hit_at_k):.3f}, "
        f"MRR {statistics.fmean(reciprocal):.3f}; "
        f"unanswerable emptied {sum(emptied)}/{len(emptied)}"
    )


if __name__ == "__main__":
    main()
