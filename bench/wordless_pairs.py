"""The relevance floor's blind spot: a terse note that shares no word with its question.

    python bench/wordless_pairs.py [--embedder e5]

The floor (recall/floor.py) is calibrated on the dev sets' conversations, where a question
nearly always shares words with some memory near its answer. A personal note can be terse
("Peanuts make my throat swell up.") and asked about in other words ("What allergies do I
have?"). This prints the embedder's cosine for such pairs, written for this script (no dev
set's text), each pair checked to share no search term (fts.query_terms), against the
model's question floor: a note alone in its bank, or among notes about other things, is
shown only when its own cosine reaches it.
"""

from __future__ import annotations

import argparse
import os

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
    args = parser.parse_args()
    from memcli import fts
    from memcli.models.load import load_embedder
    from memcli.recall.floor import COSINE_FLOORS

    model = load_embedder(args.embedder)
    question_floor, item_floor = COSINE_FLOORS.get(model.name, (None, None))
    embed_query = getattr(model, "embed_query", None) or (lambda t: model.embed([t])[0])
    below = 0
    for question, note in PAIRS:
        shared = set(fts.query_terms(question, "both")) & set(fts.query_terms(note, "both"))
        if shared:
            raise SystemExit(f"{question!r} and {note!r} share {sorted(shared)}")
        cosine = float(embed_query(question) @ model.embed([note])[0])
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


if __name__ == "__main__":
    main()
