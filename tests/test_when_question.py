"""A question that asks when is answered by a memory that says when: recall's temporal boost
favours the memories retain dated by a time phrase (recall/scoring.py stated_time_signal), with
the real e5 embedder and a real store."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from memcli.models.load import load_embedder
from memcli.recall import RecallOptions, recall
from memcli.retain import Retainer, RetainItem
from memcli.settings import RecallSettings
from memcli.store.location import open_store

NOW = datetime(2026, 11, 20)
NOTES = [
    "Mia played Chopin at her piano recital, it was lovely.",
    "Mia's piano recital was two weeks ago.",
    "Tom started his new job at the bank.",
    "Tom started at the bank on Monday.",
    "The weather has been grey all week.",
]


@pytest.fixture(scope="module")
def notes(tmp_path_factory):
    embedder = load_embedder("e5")
    store = open_store(tmp_path_factory.mktemp("when") / "notes.db")
    Retainer(store, "default", embedder, now=NOW).retain(
        [RetainItem(t, timestamp=NOW - timedelta(days=3 * i)) for i, t in enumerate(NOTES)]
    )
    yield store, embedder
    store.close()


def ask(notes, query, **settings):
    store, embedder = notes
    return recall(
        store,
        "default",
        query,
        RecallOptions(now=NOW, rerank=False),
        embedder=embedder,
        settings=RecallSettings(**settings),
    )


def test_a_when_question_favours_the_memories_that_say_a_time(notes):
    alpha = RecallSettings().when_alpha
    result = ask(notes, "When did Tom start his new job?")
    boosts = {c.fact.text: c.temporal for c in result.ranked}
    # Retain dated the notes that say a time ("on Monday", "two weeks ago"): those gain.
    assert boosts["Tom started at the bank on Monday."] == pytest.approx(1 + alpha / 2)
    assert boosts["Mia's piano recital was two weeks ago."] == pytest.approx(1 + alpha / 2)
    assert boosts["Tom started his new job at the bank."] == pytest.approx(1 - alpha / 2)
    # The gap between the two notes about Tom narrows by the boost, in the JSON too.
    about, dated = (
        next(c for c in result.ranked if c.fact.text == t)
        for t in ("Tom started his new job at the bank.", "Tom started at the bank on Monday.")
    )
    plain = ask(notes, "When did Tom start his new job?", when_alpha=0.0)
    plain_about, plain_dated = (
        next(c for c in plain.ranked if c.fact_id == c2.fact_id) for c2 in (about, dated)
    )
    assert dated.final / about.final == pytest.approx(
        plain_dated.final / plain_about.final * (1 + alpha / 2) / (1 - alpha / 2)
    )
    shown = {r["text"]: r for r in result.to_json()["results"]}
    assert shown["Tom started at the bank on Monday."]["scores"]["temporal"] == pytest.approx(
        1 + alpha / 2, abs=1e-3
    )


def test_other_questions_keep_the_temporal_boost_neutral(notes):
    # Not a question for a time: no memory gains by saying one.
    assert {c.temporal for c in ask(notes, "Where does Tom work?").ranked} == {1.0}
    # A time question that names its window is boosted by the window, as before: by how near
    # each memory's time lies to the window's centre, whether it says a time or not.
    window = ask(notes, "When this month was Mia's piano recital?")
    assert window.time_window is not None
    boosts = {round(c.temporal, 6) for c in window.ranked}
    assert len(boosts) > 1 and not boosts <= {0.9, 1.1}
