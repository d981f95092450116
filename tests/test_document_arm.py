"""The document arm: windows of consecutive facts, one vector each (recall/document.py)."""

from __future__ import annotations

from datetime import datetime, timedelta

from memcli.recall import RecallOptions, recall
from memcli.recall.document import windows
from memcli.retain import RetainItem
from memcli.settings import RecallSettings

T0 = datetime(2026, 3, 2, 18, 0)


def test_windows_stay_in_one_sitting_and_one_document():
    minute = timedelta(minutes=1)
    rows = [
        (1, None, T0),
        (2, None, T0 + minute),
        (3, None, T0 + 2 * minute),
        (4, None, T0 + timedelta(days=1)),  # the next day: another sitting
        (5, 7, T0 + timedelta(days=1, minutes=1)),  # said a minute later, in a document
        (6, 7, T0 + timedelta(days=1, minutes=2)),
        (7, 7, T0 + timedelta(days=1, minutes=3)),
    ]
    spans = windows([2, 4, 6, 1], rows, radius=1, max_gap_hours=6)
    assert spans == {2: [1, 2, 3], 4: [4], 6: [5, 6, 7], 1: [1, 2]}
    assert windows([6], rows, radius=3, max_gap_hours=6) == {6: [5, 6, 7]}
    # A gap limit of zero hours keeps only facts said at the same instant.
    assert windows([2], rows, radius=2, max_gap_hours=0) == {2: [2]}


LESSONS = [
    "I finally signed up for lessons at the music school on Elm Street.",
    "The teacher, Marco, is patient and funny.",
    "We practised chords for an hour: C, G and D.",
    "My fingertips hurt from pressing the strings so hard.",
]
OTHER = [
    "The plumber fixed the leaking kitchen tap this morning.",
    "Paid the electricity bill, it went up again.",
    "Booked the car in for its annual service next Tuesday.",
]


def test_a_passage_about_the_topic_lifts_all_its_turns(store, remember, embedder):
    day = datetime(2026, 3, 2, 18)
    items = [
        RetainItem(t, timestamp=day + timedelta(minutes=i), context="me")
        for i, t in enumerate(LESSONS)
    ]
    items += [
        RetainItem(t, timestamp=day + timedelta(days=3, minutes=i), context="me")
        for i, t in enumerate(OTHER)
    ]
    remember(items)
    result = recall(
        store,
        "default",
        "learning to play the guitar",
        RecallOptions(arms=("semantic", "document"), now=day + timedelta(days=5)),
        embedder=embedder,
        # The semantic arm's floor as it was when this was written: the teacher's turn alone
        # is below it (embedded with its lead-in: a cosine between 0.2 and 0.3), so only its
        # passage can find it.
        settings=RecallSettings(document_radius=3, semantic_floor=0.3),
    )
    doc = result.arms["document"]
    by_id = {h.fact_id: h.score for h in doc.hits}
    texts = {c.fact_id: c.fact.text for c in result.ranked}
    lesson_ids = [f for f, t in texts.items() if t in LESSONS]
    # The lessons are one sitting: every turn of it has the window's one score, which is
    # above every score the other sitting's turns get.
    assert len(lesson_ids) == len(LESSONS)
    assert len({round(by_id[f], 6) for f in lesson_ids}) == 1
    others = [s for f, s in by_id.items() if f not in lesson_ids]
    assert all(s < by_id[lesson_ids[0]] for s in others)
    # The teacher's turn alone is not near the query (no semantic hit); in its passage it is
    # found.
    teacher = next(f for f, t in texts.items() if "Marco" in t)
    assert teacher not in {h.fact_id for h in result.arms["semantic"].hits}
    assert teacher in by_id


def test_off_and_forgotten(store, remember, embedder):
    remember([RetainItem(t, timestamp=T0 + timedelta(minutes=i)) for i, t in enumerate(LESSONS)])
    options = RecallOptions(arms=("semantic", "document"), now=T0 + timedelta(days=1))
    off = recall(
        store,
        "default",
        "guitar lessons",
        options,
        embedder=embedder,
        settings=RecallSettings(document_radius=0),
    )
    assert off.arms["document"].hits == []
    first = recall(store, "default", "guitar lessons", options, embedder=embedder)
    gone = first.arms["document"].hits[0].fact_id
    with store.atomic():
        store.facts.delete_facts([gone])
    again = recall(store, "default", "guitar lessons", options, embedder=embedder)
    assert gone not in {h.fact_id for h in again.arms["document"].hits}
    assert again.arms["document"].hits
