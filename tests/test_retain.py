"""Retain stores facts, entities, dates, links, chunks, vectors and the FTS index, for real."""

from __future__ import annotations

from datetime import datetime

from memcli.retain import Retainer, RetainItem
from memcli.settings import RetainSettings


def count(store, sql, *args):
    return store.conn.execute(sql, args).fetchone()[0]


def test_a_note_becomes_a_fact_with_everything_indexed(store, remember):
    summary = remember(
        "Caroline went to the LGBTQ support group yesterday.",
        source_id="D1:3",
        timestamp=datetime(2023, 5, 8, 13, 56),
        context="Caroline",
        tags=["dialog"],
    )
    assert summary.facts == 1
    fact_id, text, source, start = store.conn.execute(
        "SELECT id, text, source_id, occurred_start FROM facts"
    ).fetchone()
    assert source == "D1:3"
    assert start.startswith("2023-05-07")  # "yesterday" resolved against when it was said
    assert count(store, "SELECT count(*) FROM fact_vec") == 1
    assert count(store, "SELECT count(*) FROM fact_fts WHERE fact_fts MATCH 'support'") == 1
    assert count(store, "SELECT count(*) FROM chunks") == 1
    names = [
        r[0]
        for r in store.conn.execute(
            "SELECT e.name FROM entities e JOIN fact_entities fe ON fe.entity_id = e.id"
        )
    ]
    assert "Caroline" in names
    assert count(store, "SELECT count(*) FROM fact_tags WHERE tag = 'dialog'") == 1


def test_same_content_is_stored_once(store, remember):
    remember("The office wifi password is hunter2.")
    second = remember("The office wifi password is hunter2.")
    assert second.duplicates == 1 and second.facts == 0
    assert count(store, "SELECT count(*) FROM facts") == 1


def test_same_document_again_replaces_it(store, remember):
    remember("Version one of the plan. We launch in May.", document_id="plan")
    remember("Version two of the plan. We launch in June.", document_id="plan")
    texts = [r[0] for r in store.conn.execute("SELECT text FROM facts")]
    assert texts == ["Version two of the plan. We launch in June."]
    assert count(store, "SELECT count(*) FROM fact_vec") == 1
    assert count(store, "SELECT count(*) FROM fact_fts") == 1


def test_long_text_splits_into_facts_that_share_a_chunk(store, remember):
    text = " ".join(
        f"Sentence number {i} talks about topic {i} in some detail here." for i in range(12)
    )
    summary = remember(text)
    assert summary.facts > 1
    assert count(store, "SELECT count(DISTINCT chunk_id) FROM facts") == 1


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
    kinds = {r[0] for r in store.conn.execute("SELECT kind FROM links")}
    # Temporal neighbours are not stored: they come from the time index at query time.
    assert kinds == {"semantic", "causal"}
    first = store.conn.execute("SELECT min(id) FROM facts").fetchone()[0]
    neighbours = store.links.time_neighbours(first, 10, 24.0 * 7, 0.3)
    assert {kind for _, kind, _ in neighbours} == {"temporal", "causal"}
    weight = max(w for _, kind, w in neighbours if kind == "temporal")
    assert weight == 1.0  # same time: 1 - 0 / 24
    low = store.conn.execute("SELECT min(weight) FROM links WHERE kind = 'semantic'").fetchone()[0]
    assert low >= 0.7


def test_temporal_links_stop_at_the_gap_cutoff(store, remember):
    remember(
        [
            RetainItem("Planted tomatoes.", timestamp=datetime(2026, 4, 1)),
            RetainItem("Harvested potatoes.", timestamp=datetime(2026, 9, 1)),
        ]
    )
    assert count(store, "SELECT count(*) FROM links WHERE kind = 'temporal'") == 0
    ids = [r[0] for r in store.conn.execute("SELECT id FROM facts ORDER BY id")]
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
    names = {r[0] for r in store.conn.execute("SELECT name FROM entities")}
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
    rows = store.conn.execute(
        "SELECT f.text FROM fact_fts JOIN facts f ON f.id = fact_fts.rowid "
        "WHERE fact_fts MATCH 'lead_in : hiking'"
    ).fetchall()
    assert rows == [("Up Ben Nevis, in the fog!",)]
    lead = store.conn.execute(
        "SELECT lead_in FROM fact_fts JOIN facts f ON f.id = fact_fts.rowid "
        "WHERE f.text = 'Dinner was lovely.'"
    ).fetchone()[0]
    assert lead == ""


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
