"""Retain stores facts, entities, dates, links, chunks, vectors and the FTS index, for real."""

from __future__ import annotations

from datetime import datetime, timedelta

from memcli.recall.filters import FactFilter
from memcli.retain import Retainer, RetainItem
from memcli.settings import RetainSettings


def facts_of(store, bank: str = "default"):
    """The bank's facts, by id (through the store, as every reader of it)."""
    bank_id = store.banks.require_bank(bank)
    return list(store.facts.facts_by_id(store.facts.fact_ids_of_bank(bank_id), bank_id).values())


def indexed(store) -> dict:
    """How many facts, keyword-index rows and vectors the store holds."""
    return store.health.index_counts()


def test_a_note_becomes_a_fact_with_everything_indexed(store, remember):
    summary = remember(
        "Caroline went to the LGBTQ support group yesterday.",
        source_id="D1:3",
        timestamp=datetime(2023, 5, 8, 13, 56),
        context="Caroline",
        tags=["dialog"],
    )
    assert summary.facts == 1
    (fact,) = facts_of(store)
    assert fact.source_id == "D1:3"
    # "yesterday" resolved against when it was said
    assert (
        fact.occurred_start is not None and fact.occurred_start.date().isoformat() == "2023-05-07"
    )
    assert indexed(store) == {"facts": 1, "fts_rows": 1, "vectors": 1}
    assert store.search.keyword_match_count("support") == 1
    assert fact.chunk_id is not None and store.documents.chunk_texts([fact.chunk_id])
    assert "Caroline" in fact.entities
    bank = store.banks.require_bank("default")
    assert store.search.filter_facts([fact.id], FactFilter(tags=("dialog",)), bank) == {fact.id}
    assert store.search.filter_facts([fact.id], FactFilter(tags=("other",)), bank) == set()


def test_same_content_is_stored_once(store, remember):
    remember("The office wifi password is hunter2.")
    second = remember("The office wifi password is hunter2.")
    assert second.duplicates == 1 and second.facts == 0
    assert store.facts.fact_count() == 1


def test_same_document_again_replaces_it(store, remember):
    remember("Version one of the plan. We launch in May.", document_id="plan")
    remember("Version two of the plan. We launch in June.", document_id="plan")
    assert [f.text for f in facts_of(store)] == ["Version two of the plan. We launch in June."]
    assert indexed(store) == {"facts": 1, "fts_rows": 1, "vectors": 1}


def test_long_text_splits_into_facts_that_share_a_chunk(store, remember):
    text = " ".join(
        f"Sentence number {i} talks about topic {i} in some detail here." for i in range(12)
    )
    summary = remember(text)
    assert summary.facts > 1
    assert len({f.chunk_id for f in facts_of(store)}) == 1


def test_links_semantic_temporal_and_causal(store, embedder):
    t = datetime(2026, 3, 1, 9)
    retainer = Retainer(
        store, "default", embedder, settings=RetainSettings(fact_max_words=8, lead_in_words=0)
    )
    retainer.retain(
        [
            RetainItem(
                "The river flooded the lower town. Because of this, the school closed for a week.",
                timestamp=t,
            ),
            RetainItem(
                "The river flooded the lower town.", timestamp=t.replace(hour=12), context="news"
            ),
        ]
    )
    ids = [f.id for f in facts_of(store)]
    stored = {
        kind: store.links.links_from(ids, kind) for kind in ("semantic", "temporal", "causal")
    }
    # Temporal neighbours are not stored: they come from the time index at query time.
    assert {kind for kind, found in stored.items() if found} == {"semantic", "causal"}
    first = min(ids)
    neighbours = store.links.time_neighbours(first, 10, 24.0 * 7, 0.3)
    assert {kind for _, kind, _ in neighbours} == {"temporal", "causal"}
    weight = max(w for _, kind, w in neighbours if kind == "temporal")
    assert weight == 1.0  # same time: 1 - 0 / 24
    assert min(weight for _, _, weight in stored["semantic"]) >= 0.7


def test_temporal_links_stop_at_the_gap_cutoff(store, remember):
    remember(
        [
            RetainItem("Planted tomatoes.", timestamp=datetime(2026, 4, 1)),
            RetainItem("Harvested potatoes.", timestamp=datetime(2026, 9, 1)),
        ]
    )
    ids = [f.id for f in facts_of(store)]
    assert store.links.links_from(ids, "temporal") == []
    assert store.links.time_neighbours(ids[0], 10, 24.0 * 7, 0.3) == []
    assert len(store.links.time_neighbours(ids[0], 10, 24.0 * 365, 0.3)) == 1


def test_entities_resolve_fuzzily_but_never_wrongly(store, remember):
    remember(
        [
            RetainItem("Tigran sent the report."),
            RetainItem("Iran is mentioned in the news."),
            RetainItem("Meet me in Room 101."),
            RetainItem("The projector is in Room 102."),
        ]
    )
    names = {name for f in facts_of(store) for name in f.entities}
    assert {"Tigran", "Iran", "Room 101", "Room 102"} <= names


def test_banks_keep_memories_apart(store, remember):
    remember("Work bank fact about quarterly budgets.", bank="work")
    remember("Home bank fact about the garden.", bank="home")
    assert set(store.banks.bank_names()) == {"work", "home"}


def test_a_reply_is_indexed_with_what_it_answers(store, remember):
    t = datetime(2026, 6, 1, 18, 0)
    remember(
        [
            RetainItem("Where did you go hiking?", timestamp=t, context="Ana"),
            RetainItem("Up Ben Nevis, in the fog!", timestamp=t.replace(minute=1), context="Bo"),
            # The next day: a new conversation, so no lead-in.
            RetainItem("Dinner was lovely.", timestamp=t.replace(day=2)),
        ]
    )
    # What each fact is indexed (and embedded) with: its lead-in, the words said before it.
    bank = store.banks.require_bank("default")
    lead_ins = {
        text: lead for _, text, _, _, _, lead, _, _ in store.reembed.embedding_inputs(bank, -1, 10)
    }
    assert [text for text, lead in lead_ins.items() if "hiking" in lead] == [
        "Up Ben Nevis, in the fog!"
    ]
    assert lead_ins["Dinner was lovely."] == ""
    # The lead-in is searched (the reply is found by "hiking"), but is not its own words.
    by_text = {f.text: f.id for f in facts_of(store)}
    assert store.search.keyword_match_count("hiking") == 2
    assert store.search.own_words_match(list(by_text.values()), ["hiking"]) == {
        by_text["Where did you go hiking?"]
    }


def test_a_text_repeated_in_one_call_is_embedded_once(store, embedder):
    """1 MB of one repeated sentence took ~110 s: every copy was embedded, then all but one
    were skipped as duplicates."""

    class Counting:
        """The real embedder, counting the texts it is given."""

        def __init__(self, inner):
            self.inner, self.texts = inner, 0

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def embed(self, texts):
            self.texts += len(texts)
            return self.inner.embed(texts)

    counting = Counting(embedder)
    text = " ".join(["The boiler in the basement was serviced on Tuesday."] * 300)
    summary = Retainer(store, "default", counting).retain([RetainItem(text)])
    assert store.facts.fact_count() == 1
    assert summary.facts == 1 and summary.duplicates >= 40  # the splitter groups sentences
    assert counting.texts == 1


CLIENT = [
    "The meeting with the client went well.",
    "Our client call was productive.",
    "The client liked our proposal.",
    "We signed the contract with the client.",
]


def test_facts_link_at_their_embedders_floor(tmp_path):
    """e5 puts more pairs above any cosine than MiniLM, and linked near-unrelated facts at
    MiniLM's 0.7: its facts link at its own floor (the same density of links); a floor
    given in the settings is used as given."""
    from memcli.models.load import load_embedder
    from memcli.retain import (
        DEFAULT_SEMANTIC_LINK_FLOOR,
        SEMANTIC_LINK_FLOORS,
        semantic_link_floor,
    )
    from memcli.store.location import open_store

    e5 = load_embedder("e5")
    floor = SEMANTIC_LINK_FLOORS[e5.name]
    assert floor > DEFAULT_SEMANTIC_LINK_FLOOR
    assert semantic_link_floor(e5) == floor
    assert semantic_link_floor(e5, RetainSettings(semantic_link_floor=0.5)) == 0.5
    assert semantic_link_floor(object()) == DEFAULT_SEMANTIC_LINK_FLOOR

    def weights(settings: RetainSettings, name: str) -> list[float]:
        store = open_store(tmp_path / f"{name}.db")
        t = datetime(2026, 3, 1, 9)
        # Days apart: each embedded alone, with no lead-in.
        items = [RetainItem(s, timestamp=t + timedelta(days=2 * i)) for i, s in enumerate(CLIENT)]
        Retainer(store, "default", e5, settings=settings).retain(items)
        ids = store.facts.fact_ids_of_bank(store.banks.require_bank("default"))
        found = sorted(w for a, b, w in store.links.links_from(ids, "semantic") if a < b)
        store.close()
        return found

    own = weights(RetainSettings(), "own")
    given = weights(RetainSettings(semantic_link_floor=DEFAULT_SEMANTIC_LINK_FLOOR), "given")
    assert own and min(own) >= floor
    # MiniLM's floor links e5's facts it would not: these four say one thing, loosely.
    between = [w for w in given if w < floor]
    assert between and min(between) >= DEFAULT_SEMANTIC_LINK_FLOOR
    assert [w for w in given if w >= floor] == own
