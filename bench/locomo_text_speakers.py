"""LoCoMo with each speaker only in the text, as `mem bench --format jsonl` reads it.

    python bench/locomo_text_speakers.py ../shared/datasets/locomo-dev.json /tmp/locomo-text.jsonl
    mem bench --dataset /tmp/locomo-text.jsonl --format jsonl

Every turn becomes an item {"text": "Caroline: Hey Mel!"} with no context: a conversation as a
chat log gives it, and the second held-out variant of issue 35 ("speakers only in the
text"). Questions, gold turns, times and sessions are those `mem bench --format locomo`
reads; category 5 (adversarial) questions are asked as unanswerable. The output goes where
it is told (never into the repository: the dataset stays in ../shared/datasets).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memcli.bench.datasets import read_locomo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo", type=Path, help="LoCoMo JSON (e.g. locomo-dev.json)")
    parser.add_argument("out", type=Path, help="JSONL to write")
    args = parser.parse_args()
    items = questions = 0
    with args.out.open("w", encoding="utf-8") as out:
        for case in read_locomo(args.locomo):
            for item in case.items:
                row = {
                    "type": "item",
                    "case": case.id,
                    "id": item.id,
                    "text": f"{item.context}: {item.text}" if item.context else item.text,
                    "timestamp": item.timestamp.isoformat() + "Z",
                    "session": item.session_id,
                }
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                items += 1
            for q in case.questions:
                row = {
                    "type": "question",
                    "case": case.id,
                    "id": q.id,
                    "query": q.query,
                    "category": q.category,
                    "gold": [] if q.unanswerable else sorted(q.gold_ids),
                }
                if q.unanswerable:
                    row["unanswerable"] = True
                if q.now is not None:
                    row["now"] = q.now.isoformat() + "Z"
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                questions += 1
    print(f"{items} turns, {questions} questions -> {args.out}")


if __name__ == "__main__":
    main()
