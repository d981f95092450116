"""A query that names a speaker searches by the mean of its vector and its vector without the
names (scoring.without_names, pipeline.py), with the real e5 embedder and a real store."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from memcli.models.load import load_embedder
from memcli.recall import RecallOptions, recall
from memcli.recall.scoring import without_names
from memcli.retain import Retainer, RetainItem
from memcli.settings import RecallSettings
from memcli.store import Store


@pytest.mark.parametrize(
    ("query", "named", "expected"),
    [
        ("What did Caroline paint?", {"caroline"}, "What did paint?"),
        ("Where is CAROLINE's dog?", {"caroline"}, "Where is dog?"),
        ("Where is Caroline’s dog?", {"caroline"}, "Where is dog?"),
        ("What do Jon and Gina share?", {"jon", "gina"}, "What do and share?"),
        ("Did Mary Ann call Mary?", {"mary ann", "mary"}, "Did call?"),
        ("What did Timothy say to Tim?", {"tim"}, "What did Timothy say to?"),  # whole words
        ("王磊的猫叫什么", {"王磊"}, "猫叫什么"),  # with its possessive particle
        ("Caroline?", {"caroline"}, "Caroline?"),  # nothing left to search by: kept
        ("What did Caroline paint?", set(), "What did Caroline paint?"),
    ],
)
def test_without_names(query: str, named: set[str], expected: str) -> None:
    assert without_names(query, frozenset(named)) == expected


TALK = [
    ("Tim", "I'm learning German these days, the grammar is hard."),
    ("John", "Tim, how was your weekend?"),
    ("John", "Tim, are you coming to the game on Friday?"),
    ("John", "I'm learning to cook Thai food."),
    ("Tim", "My weekend was quiet, I read a lot."),
    ("John", "Tim, did you finish that fantasy novel?"),
]


@pytest.fixture(scope="module")
def talk(tmp_path_factory: pytest.TempPathFactory):
    e5 = load_embedder("e5")
    store = Store(Path(tmp_path_factory.mktemp("named")) / "talk.db")
    Retainer(store, "default", e5).retain([RetainItem(text=t, context=who) for who, t in TALK])
    yield store, e5
    store.close()


def run(talk, query: str, **settings):
    store, e5 = talk
    chosen = replace(RecallSettings(), **settings)
    return recall(store, "default", query, RecallOptions(), embedder=e5, settings=chosen)


def top_semantic_text(talk, result) -> str:
    store, _ = talk
    top = result.arms["semantic"].hits[0].fact_id
    return store.facts.facts_by_id([top])[top].text


def test_the_name_no_longer_pulls_the_vector_to_what_others_said_to_them(talk) -> None:
    query = "Which language is Tim learning?"
    whole = run(talk, query, unnamed_query_share=0.0)
    # By the whole query's vector, John's "Tim, how was your weekend?" is nearest: the name.
    assert top_semantic_text(talk, whole) == TALK[1][1]
    assert whole.notes["vector_query"] == query
    mixed = run(talk, query)
    assert top_semantic_text(talk, mixed) == TALK[0][1]
    assert mixed.notes["vector_query"] == "Which language is learning?"
    assert mixed.notes["speakers_named"] == ["tim"]
    assert mixed.results[0].fact.text == TALK[0][1]


def test_a_query_that_names_nobody_or_runs_without_boosts_is_searched_whole(talk) -> None:
    assert run(talk, "Who is learning German?").notes["vector_query"] == "Who is learning German?"
    store, e5 = talk
    options = RecallOptions(boosts=False)
    result = recall(store, "default", "What is Tim learning?", options, embedder=e5)
    assert result.notes["vector_query"] == "What is Tim learning?"
    assert result.notes["speakers_named"] == []
