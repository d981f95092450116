"""The relevance floor's blind spot: a terse note that shares no word with its question.

    python bench/wordless_pairs.py [--embedder e5] [--wordless W]

The floor (recall/floor.py) is calibrated on the dev sets' conversations, where a question
nearly always shares words with some memory near its answer. A personal note can be terse
("Peanuts make my throat swell up.") and asked about in other words ("What allergies do I
have?"). This prints the embedder's cosine for such pairs, written for this script (no dev
set's text), each pair checked to share no search term (fts.query_terms), against the
model's question floor: a note alone in its bank, or among notes about other things, is
shown only when its own cosine reaches it. Then all the notes are retained into one new
store and each question recalled as `mem recall` does (real pipeline, default floor): how
many get nothing, and for how many of those the note would have come first without the
floor. `--wordless W` also counts the notes hidden when a candidate below cosine W must share
a term with the question to pass the question floor (bench/calibrate_floor.py --wordless,
measured and not kept: bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

PAIRS = [
    ("What's my pet's name?", "I adopted a kitten and called her Milo."),
    ("Where do I work?", "My office is at Acme Corp downtown."),
    ("When is my flight?", "The plane to Lisbon leaves Tuesday at 7am."),
    ("How old is my daughter?", "Emma turned seven last month."),
    ("What car do I drive?", "I bought a used Honda Civic in March."),
    ("Which doctor did I see?", "Had my checkup with Dr. Patel yesterday."),
    ("What allergies do I have?", "Peanuts make my throat swell up."),
    ("Who is my manager?", "I report to Sarah Kim."),
    ("What instrument do I play?", "Practicing guitar every evening."),
    ("What's the wifi password?", "Network key for the router is hunter2."),
    ("Where did I go on vacation?", "We spent two weeks in Portugal this summer."),
    ("What did I eat for dinner?", "Pasta carbonara tonight."),
    ("What is my favourite movie?", "I could watch The Matrix a hundred times."),
    ("What language am I learning?", "Practicing my Spanish verbs on Duolingo."),
    ("When is the team meeting?", "Standup moved to 9:30 on Mondays."),
    ("What time is the boat?", "Booked the ferry to the island for the second week of June."),
    ("When is my next doctor visit?", "My annual check-up with Dr. Okafor is on the 14th."),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default=os.environ.get("MEM_EMBEDDER") or "e5")
    parser.add_argument("--wordless", type=float, help="also count the word rule at this cosine")
    args = parser.parse_args()
    from memcli import fts
    from memcli.models.load import load_embedder
    from memcli.recall.floor import COSINE_FLOORS

    model = load_embedder(args.embedder)
    question_floor, item_floor = COSINE_FLOORS.get(model.name, (None, None))
    below = 0
    for question, note in PAIRS:
        shared = set(fts.query_terms(question, "both")) & set(fts.query_terms(note, "both"))
        if shared:
            raise SystemExit(f"{question!r} and {note!r} share {sorted(shared)}")
        cosine = float(model.embed_query(question) @ model.embed([note])[0])
        hidden = question_floor is not None and cosine < question_floor
        below += hidden
        print(f"{cosine:.3f} {'hidden' if hidden else 'shown ':<6}  {question}  ->  {note}")
    if question_floor is None:
        print(f"{model.name} has no calibrated floor")
        return
    print(
        f"{model.name}: question floor {question_floor}, item floor {item_floor}: "
        f"{below} of {len(PAIRS)} notes below the question floor"
    )
    in_bank(model, question_floor, item_floor, args.wordless)


def in_bank(model, question_floor: float, item_floor: float, wordless: float | None) -> None:
    """All the notes in one store, a day apart; each question recalled with the default
    floor, and with none. With `wordless`, the floor's two levels are also applied to the
    unfloored candidates by bench/calibrate_floor.passes, without the word rule and with it
    (one measure for both: a note is hidden when its question fails the question floor or
    the note itself the item floor)."""
    from calibrate_floor import passes

    from memcli import lang
    from memcli.recall import RecallOptions, recall
    from memcli.recall.floor import CHECKED, CROSS_SCRIPT_FLOORS, term_coverage
    from memcli.retain import Retainer, RetainItem
    from memcli.settings import RecallSettings
    from memcli.store.location import open_store

    now = datetime(2026, 11, 20)
    cross = CROSS_SCRIPT_FLOORS.get(model.name)
    cross_item = cross * item_floor / question_floor if cross is not None else None
    empty = first_unfloored = 0
    hidden = {None: 0, wordless: 0}
    with tempfile.TemporaryDirectory() as work:
        store = open_store(Path(work) / "notes.db")
        try:
            Retainer(store, "default", model, now=now).retain(
                [RetainItem(n, timestamp=now - timedelta(days=i)) for i, (_, n) in enumerate(PAIRS)]
            )
            bank = store.banks.require_bank("default")

            def ask(question: str, **settings):
                options = RecallOptions(now=now, rerank=False)
                return recall(
                    store,
                    "default",
                    question,
                    options,
                    embedder=model,
                    settings=RecallSettings(**settings),
                )

            for question, note in PAIRS:
                unfloored = ask(question, floor_cosine=0.0)
                head = unfloored.ranked[:CHECKED]
                # The note's fact (a note is one sentence: one fact of the same text); one
                # not among the checked candidates is hidden.
                note_id = next((c.fact_id for c in head if c.fact.text == note), None)
                if not ask(question).results:
                    empty += 1
                    first_unfloored += note_id is not None and head[0].fact_id == note_id
                if wordless is None:
                    continue
                ids = [c.fact_id for c in head]
                cosines = store.vectors.fact_vectors(bank, ids) @ model.embed_query(question)
                shares = term_coverage(store, question, ids)
                timely = (
                    {h.fact_id for h in unfloored.arms["temporal"].hits}
                    if unfloored.time_window is not None and "temporal" in unfloored.arms
                    else set()
                )
                written = lang.writing(question)
                rows = {
                    c.fact_id: [
                        float(cos),
                        shares.get(c.fact_id, 0.0),
                        int(c.fact_id in timely),
                        int(lang.in_other_script(written, c.fact.text)),
                    ]
                    for c, cos in zip(head, cosines)
                }
                note_row = rows.get(note_id)
                for rule in hidden:
                    shown = (
                        note_row is not None
                        and passes(list(rows.values()), question_floor, 1.0, cross, rule)
                        and passes([note_row], item_floor, 1.0, cross_item)
                    )
                    hidden[rule] += not shown
        finally:
            store.close()
    print(
        f"in one bank of the {len(PAIRS)} notes: {empty} questions get nothing; without the "
        f"floor the note is first for {first_unfloored} of them"
    )
    if wordless is not None:
        print(
            f"notes hidden by the floor's two levels over the unfloored candidates: "
            f"{hidden[None]}; with a shared word asked below cosine {wordless}: {hidden[wordless]}"
        )


if __name__ == "__main__":
    main()
