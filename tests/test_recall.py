"""Recall end to end on a real store: each arm proven by a case only it can solve, filters,
the JSON contract and the trace."""

from __future__ import annotations

from datetime import datetime

import pytest

from memcli import render
from memcli.recall import RecallError, RecallOptions, recall, replies
from memcli.recall.types import ARMS, Candidate
from memcli.retain import RetainItem
from memcli.settings import RecallSettings

NOW = datetime(2026, 11, 20)


def run(store, embedder, query, **opts):
    opts.setdefault("now", NOW)
    return recall(store, "default", query, RecallOptions(**opts), embedder=embedder)


def ranks_of(result, text_part):
    for c in result.ranked:
        if text_part in c.fact.text:
            return c.ranks
    return None


def test_semantic_arm_alone_finds_a_paraphrase(store, remember, embedder):
    remember(
        [
            RetainItem("I adopted a kitten from the animal shelter."),
            RetainItem("The quarterly tax return is due in April."),
        ]
    )
    result = run(store, embedder, "new feline pet")
    ranks = ranks_of(result, "kitten")
    assert ranks["semantic"] == 1
    assert ranks["keyword"] is None  # no shared word
    assert result.results[0].fact.text.startswith("I adopted a kitten")


def test_keyword_arm_alone_ranks_an_exact_rare_term_first(store, remember, embedder):
    remember(
        [
            RetainItem("Transferred 7731 euros to Bob on Tuesday."),
            RetainItem("The plumber sent invoice 2208 for the boiler."),
            RetainItem("The plumber sent invoice 4150 for the sink."),
            RetainItem("The plumber sent invoice 9902 for the shower."),
            RetainItem("Paid the plumber invoice for the radiator."),
        ]
    )
    result = run(store, embedder, "plumber invoice 7731")
    ranks = ranks_of(result, "7731")
    # BM25's IDF makes the one rare exact term outweigh two common ones; the embedding
    # prefers the invoices that read alike.
    assert ranks["keyword"] == 1
    assert ranks["semantic"] is None or ranks["semantic"] > 1


def test_graph_arm_alone_reaches_a_fact_through_a_shared_entity(store, remember, embedder):
    # Separate retain calls, so neither fact is the other's lead-in.
    remember("The Zorblax migration project is led by Hannelore.")
    remember("Hannelore collects antique pendulum clocks.")
    remember("The cafeteria serves soup on Mondays.")
    result = run(store, embedder, "Who runs the Zorblax migration?")
    ranks = ranks_of(result, "pendulum clocks")
    assert ranks is not None and ranks["graph"] is not None
    assert ranks["semantic"] is None and ranks["keyword"] is None and ranks["temporal"] is None


def test_temporal_arm_alone_finds_what_happened_in_the_window(store, remember, embedder):
    remember(
        [
            RetainItem("Bought a green kayak.", timestamp=datetime(2024, 3, 12)),
            RetainItem("Bought a red bicycle.", timestamp=datetime(2025, 7, 2)),
        ]
    )
    result = run(store, embedder, "what happened in March 2024?")
    assert result.time_window is not None
    assert result.time_window.start == datetime(2024, 3, 1)
    ranks = ranks_of(result, "kayak")
    assert ranks["temporal"] == 1
    assert ranks["keyword"] is None and ranks["graph"] is None
    assert ranks_of(result, "bicycle") is None or ranks_of(result, "bicycle")["temporal"] is None


def test_fts5_syntax_in_a_query_is_plain_words(store, remember, embedder):
    remember("Notes on the NEAR field communication chip and the AND gate.")
    for query in ['"unbalanced', "(NEAR OR", "chip*", "-gate", "col:umn", "AND OR NOT", "'\")(x*:"]:
        result = run(store, embedder, query)
        assert isinstance(result.results, list)
    # Only FTS5's punctuation: nothing to search for, a clear error (no FTS5 syntax error).
    with pytest.raises(RecallError, match="no letters"):
        run(store, embedder, "'\")(*:")
    result = run(store, embedder, "NEAR AND (chip)")
    assert result.results and "NEAR field" in result.results[0].fact.text


def test_cjk_text_is_found_by_keyword(store, remember, embedder):
    remember(
        [
            RetainItem("我明天去东京出差。"),
            RetainItem("서울에서 친구를 만났어요."),
            RetainItem("来週、京都で会議があります。"),
        ]
    )
    for query, expected in [("东京", "东京"), ("서울", "서울"), ("京都", "京都")]:
        result = run(store, embedder, query, arms=("keyword",))
        assert result.results, query
        assert expected in result.results[0].fact.text


@pytest.mark.parametrize(
    "mode,expected",
    [
        # facts tagged: a, ab, abc, c and one untagged; the query asks for tags a and b
        ("any", {"a", "ab", "abc", "none"}),
        ("all", {"ab", "abc", "none"}),
        ("any_strict", {"a", "ab", "abc"}),
        ("all_strict", {"ab", "abc"}),
        ("exact", {"ab"}),
    ],
)
def test_tag_modes(store, remember, embedder, mode, expected):
    remember(
        [
            RetainItem("Budget item alpha.", tags=["a"]),
            RetainItem("Budget item beta.", tags=["a", "b"]),
            RetainItem("Budget item gamma.", tags=["a", "b", "c"]),
            RetainItem("Budget item delta."),
            RetainItem("Budget item epsilon.", tags=["c"]),
        ]
    )
    result = run(store, embedder, "budget item", tags=["a", "b"], tags_match=mode)
    label = {"alpha.": "a", "beta.": "ab", "gamma.": "abc", "delta.": "none", "epsilon.": "c"}
    assert {label[c.fact.text.split()[2]] for c in result.results} == expected


def test_type_filter(store, remember, embedder):
    remember(
        [
            RetainItem("I walked the dog in the park.", fact_type="experience"),
            RetainItem("Dogs need daily walks in the park.", fact_type="world"),
        ]
    )
    result = run(store, embedder, "dog walk park", types=["world"])
    assert [c.fact.fact_type for c in result.results] == ["world"]


def test_json_contract(store, remember, embedder):
    remember(
        "Priya moved to Lisbon for her PhD.",
        source_id="n2",
        context="Maya",
        timestamp=datetime(2025, 10, 2),
    )
    result = run(store, embedder, "Where did Priya move?", max_tokens=500)
    obj = render.to_json_obj(result, trace=True)
    assert set(obj) >= {
        "query",
        "now",
        "budget",
        "max_tokens",
        "total_tokens",
        "reranker",
        "time_window",
        "results",
        "trace",
    }
    assert obj["reranker"] is None and obj["budget"] == "mid" and obj["max_tokens"] == 500
    first = obj["results"][0]
    assert set(first) == {
        "id",
        "source_id",
        "document_id",
        "text",
        "context",
        "type",
        "tags",
        "mentioned_at",
        "occurred_start",
        "occurred_end",
        "entities",
        "tokens",
        "score",
        "scores",
        "ranks",
    }
    assert first["source_id"] == "n2" and first["context"] == "Maya"
    assert set(first["scores"]) == {
        "rrf",
        "reply",
        "reranker",
        "recency",
        "temporal",
        "proof",
        "speaker",
    }
    assert set(first["ranks"]) == {"semantic", "keyword", "graph", "temporal", "document"}
    assert first["scores"]["reranker"] is None
    assert obj["total_tokens"] == sum(r["tokens"] for r in obj["results"])
    assert "synthetic" in obj["trace"]["scores"]


def test_a_named_speaker_own_memory_comes_first(store, remember, embedder):
    day = datetime(2026, 6, 1)
    remember(
        [
            RetainItem("I just got back from hiking in the Alps.", context="Sam", timestamp=day),
            RetainItem("Hiking in the Alps sounds amazing!", context="Priya", timestamp=day),
        ]
    )
    unnamed = run(store, embedder, "hiking in the Alps")
    assert unnamed.notes["speakers_named"] == []
    assert {c.speaker for c in unnamed.ranked} == {1.0}
    for who in ("Sam", "Priya"):
        result = run(store, embedder, f"What did {who} say about hiking in the Alps?")
        assert result.notes["speakers_named"] == [who.lower()]
        assert result.results[0].fact.context == who
        assert [c.speaker for c in result.ranked] == pytest.approx([1.2, 0.8])


def test_budget_cuts_by_tokens(store, remember, embedder):
    remember([RetainItem(f"Garden note {i}: watered the tomatoes and peppers.") for i in range(10)])
    result = run(store, embedder, "garden tomatoes", max_tokens=40)
    assert 0 < result.total_tokens <= 40
    assert len(result.results) < len(result.ranked)


def test_include_chunks_returns_source_text(store, remember, embedder):
    long_text = "\n\n".join(
        f"Paragraph {i}. The lighthouse keeper logged the storm on night {i}." for i in range(3)
    )
    remember(long_text)
    result = run(store, embedder, "lighthouse storm", include_chunks=True, max_chunk_tokens=20)
    assert result.chunks and sum(c["tokens"] for c in result.chunks) <= 20


def test_unknown_bank_is_an_error(store, remember, embedder):
    remember("something")
    from memcli.store import StoreError

    with pytest.raises(StoreError, match="unknown bank"):
        recall(store, "nope", "x", RecallOptions(), embedder=embedder)


def test_the_answer_to_a_matching_question_moves_up(store, remember, embedder):
    t = datetime(2026, 3, 2, 18, 0)
    remember(
        [
            RetainItem(
                "Congrats on the exchange semester! Where are you going to stay in Ireland?",
                context="Ann",
                timestamp=t,
            ),
            RetainItem("Galway, in a shared flat near the harbour.", context="Bo", timestamp=t),
            RetainItem("My cousin stayed in Ireland for a semester.", context="Ann", timestamp=t),
        ]
    )
    query = "where is the stay in Ireland during the exchange semester"

    def order(share: float) -> list[str]:
        options = RecallOptions(now=NOW)
        result = recall(
            store,
            "default",
            query,
            options,
            embedder=embedder,
            settings=RecallSettings(reply_share=share),
        )
        return [c.fact.text.split()[0] for c in result.ranked]

    # The question matches best either way; its answer shares no word with the query and
    # only moves above the look-alike with a share of the question's score.
    assert order(0.0) == ["Congrats", "My", "Galway,"]
    assert order(0.3) == ["Congrats", "Galway,", "My"]


def test_a_reply_inherits_a_share_of_its_question_score(store, remember):
    t = datetime(2026, 11, 1, 10, 0)
    remember(
        [
            RetainItem("So, where are you going to stay?", timestamp=t, context="Ann"),
            RetainItem("At my aunt's place.", timestamp=t.replace(minute=1), context="Bo"),
            RetainItem("The weather was nice.", timestamp=t.replace(minute=2), context="Ann"),
            RetainItem("Why not?", timestamp=t.replace(day=9), context="Bo"),
            RetainItem("It rained all week.", timestamp=t.replace(day=9, minute=1), context="Bo"),
            RetainItem("Lunch, anyone?", timestamp=t.replace(day=9, minute=2)),
            RetainItem("Count me in.", timestamp=t.replace(day=9, minute=3), context="Bo"),
        ]
    )
    ids = sorted(store.facts.fact_ids_of_bank(store.banks.require_bank("default")))
    question, reply, weather, late, same_speaker, unsaid, count_me = ids
    # "Why not?" came more than reply_max_gap_hours after the fact before it.
    assert store.facts.next_facts(ids, 6.0) == {
        question: reply,
        reply: weather,
        late: same_speaker,
        same_speaker: unsaid,
        unsaid: count_me,
    }

    facts = store.facts.facts_by_id(ids)
    cands = []
    for fid, fused in [
        (question, 1.0),
        (weather, 0.5),
        (reply, 0.4),
        (late, 0.9),
        (same_speaker, 0.1),
        (unsaid, 0.8),
        (count_me, 0.05),
    ]:
        c = Candidate(fid, {a: None for a in ARMS}, {}, fused=fused)
        c.fact = facts[fid]
        cands.append(c)
    ordered = replies.propagate(store, cands, RecallSettings(reply_share=0.3))
    assert [c.fact_id for c in ordered] == [
        question,
        late,
        unsaid,
        reply,
        weather,
        same_speaker,
        count_me,
    ]
    by_id = {c.fact_id: c for c in ordered}
    assert by_id[reply].fused == pytest.approx(0.4 + 0.3 * 1.0)
    assert by_id[reply].reply == pytest.approx(0.3)
    assert by_id[weather].fused == 0.5  # "At my aunt's place." asks nothing
    assert by_id[same_speaker].fused == 0.1  # Bo going on after Bo's own question is no reply
    assert by_id[count_me].fused == 0.05  # a question nobody is named as asking has no answer
    off = replies.propagate(store, ordered, RecallSettings(reply_share=0.0))
    assert off is ordered


# A day of errands among notes from other days that share a time query's other words.
_ERRANDS = [
    RetainItem("I went to the dentist and had a filling.", timestamp=datetime(2026, 12, 3, 10)),
    RetainItem("Had lunch with Maria at the Thai place.", timestamp=datetime(2026, 12, 3, 13)),
    *(
        RetainItem(
            f"What happened at work: meeting number {i} about what we should do next.",
            timestamp=datetime(2026, 11, 20 + i, 9),
        )
        for i in range(1, 9)
    ),
    RetainItem("I wonder what happened to my old bike.", timestamp=datetime(2026, 11, 10, 9)),
]


@pytest.mark.parametrize(
    "query, first_two",
    [
        # Mostly or only time words: the question asks for that day's memories.
        ("what happened yesterday?", {"dentist", "lunch"}),
        ("what did I do yesterday", {"dentist", "lunch"}),
        ("What did I do on December 3, 2026?", {"dentist", "lunch"}),
        # Topic words as well: the topic still leads inside the day.
        ("who did I have lunch with yesterday?", {"lunch", "dentist"}),
    ],
)
def test_a_question_about_a_time_gets_that_time_first(store, remember, embedder, query, first_two):
    remember(_ERRANDS)
    result = run(store, embedder, query, now=datetime(2026, 12, 4, 12))
    top = [c.fact.text for c in result.results[:2]]
    assert {w for w in first_two if any(w in t for t in top)} == first_two, top
    if "lunch with" in query:
        assert "lunch" in top[0]


_ERRANDS_ZH = [
    RetainItem("我去看了牙医，补了一颗牙。", timestamp=datetime(2026, 12, 3, 10)),
    RetainItem("和玛丽亚在泰国餐厅吃了午饭。", timestamp=datetime(2026, 12, 3, 13)),
    *(
        RetainItem(
            f"工作上发生了什么：第{i}次会议，讨论接下来做什么。",
            timestamp=datetime(2026, 11, 20 + i, 9),
        )
        for i in range(1, 9)
    ),
    RetainItem("不知道我的旧自行车发生了什么。", timestamp=datetime(2026, 11, 10, 9)),
]


@pytest.mark.parametrize("query", ["昨天发生了什么？", "我昨天做了什么"])
def test_a_cjk_question_about_a_time_gets_that_time_first(store, remember, embedder, query):
    """The CJK time words count as the English ones do (before, their share was 0: the CJK
    date scan kept no place in the query)."""
    remember(_ERRANDS_ZH)
    result = run(store, embedder, query, now=datetime(2026, 12, 4, 12))
    top = [c.fact.text for c in result.results[:2]]
    assert {w for w in ("牙医", "午饭") if any(w in t for t in top)} == {"牙医", "午饭"}, top


@pytest.mark.parametrize(
    "query, share",
    [
        ("what happened yesterday?", 1 / 2),
        ("what did I do yesterday", 1.0),
        ("yesterday's meeting", 1 / 2),  # the possessive is still the time word
        ("what was last week's plan?", 2 / 3),
        ("Which restaurant did Maria pick for the team dinner last week?", 2 / 7),
        ("what did I do on 2024-06-10?", 1.0),
        ("where is the kayak?", 0.0),  # no time named
        # CJK: 昨, 天, 昨天 and the pair across the edge (天发) are 4 of the 13 terms.
        ("昨天发生了什么", 4 / 13),
        ("我上周去了哪里？", 5 / 13),
    ],
)
def test_time_words_share_of_a_query_raises_the_temporal_arm_weight(query, share):
    from memcli.recall import fusion
    from memcli.timeparse import query_window_phrase

    s = RecallSettings()
    found = query_window_phrase(query, datetime(2026, 12, 4, 12))
    t = fusion.time_share(query, found[1] if found else None, s.keyword_cjk_terms)
    assert t == pytest.approx(share)
    base = s.score_weights
    weights, note = fusion.query_weights(base, query, None, s, t)
    expected = base["temporal"] + share * (s.time_query_temporal_weight - base["temporal"])
    assert weights["temporal"] == pytest.approx(expected)
    assert {k: v for k, v in weights.items() if k != "temporal"} == {
        k: v for k, v in base.items() if k != "temporal"
    }
    assert (note is None) == (share == 0.0)


def test_a_time_question_changes_only_the_fusion_weights_of_the_arms_that_ran(
    store, remember, embedder
):
    remember(_ERRANDS)
    now = datetime(2026, 12, 4, 12)
    result = run(store, embedder, "what happened yesterday?", now=now)
    assert result.notes["fusion_weights"]["temporal"] == pytest.approx(1.7)
    assert "temporal 0.40 -> 1.70" in result.notes["fusion_weights_reason"]
    # RRF, shown beside, keeps the reference weights: 1 / (60 + rank) for the temporal arm.
    top = next(c for c in result.ranked if c.ranks["temporal"] == 1)
    assert top.rrf == pytest.approx(sum(1 / (60 + r) for r in top.ranks.values() if r))
    keyword_only = run(store, embedder, "what happened yesterday?", now=now, arms=("keyword",))
    assert keyword_only.notes["fusion_weights_reason"] is None


def test_an_arm_with_a_score_floor_keeps_its_last_hit_in_fusion():
    from memcli.recall import fusion
    from memcli.recall.types import ArmHit, ArmResult

    plain = ArmResult("temporal", [ArmHit(1, 0.9), ArmHit(2, 0.6)], "temporal")
    floored = ArmResult("temporal", list(plain.hits), "temporal", score_floor=0.0)
    assert fusion.min_max(plain) == {1: 1.0, 2: 0.0}  # min-max: the last hit counts as missed
    assert fusion.min_max(floored) == {1: 1.0, 2: pytest.approx(0.6 / 0.9)}


@pytest.mark.parametrize(
    "query, days, expected",
    [
        # An open window ("since", "after", "before", "until") asks for all of its time
        # alike: no part of it is nearer what was asked, so a more recent class is not
        # pushed below one from the window's middle, and what lies outside comes last.
        (
            "how many pottery classes did I go to since January?",
            [(2025, 12, 20), (2026, 6, 15), (2026, 11, 27)],
            [(2026, 11, 27), (2026, 6, 15), (2025, 12, 20)],
        ),
        (
            "what pottery classes did I go to after May?",
            [(2026, 5, 20), (2026, 8, 10), (2026, 11, 27)],
            [(2026, 11, 27), (2026, 8, 10), (2026, 5, 20)],
        ),
        (
            "which pottery classes did I go to before March?",
            [(2026, 2, 10), (2026, 4, 10)],
            [(2026, 2, 10), (2026, 4, 10)],
        ),
        # A closed window keeps its centre: June's class before November's (a control).
        (
            "which pottery class did I go to in June?",
            [(2026, 6, 15), (2026, 11, 27)],
            [(2026, 6, 15), (2026, 11, 27)],
        ),
    ],
)
def test_an_open_time_window_weighs_all_of_its_time_alike(
    store, remember, embedder, query, days, expected
):
    # One call each: the same text then makes the same vector and BM25 score (within one
    # call each item would be the next one's lead-in), so only time tells the classes apart.
    for day in days:
        remember([RetainItem("I went to a pottery class.", timestamp=datetime(*day, 18))])
    result = run(store, embedder, query, now=datetime(2026, 12, 4, 12))
    got = [c.fact.occurred_start or c.fact.mentioned_at for c in result.results]
    assert [(d.year, d.month, d.day) for d in got] == expected


# Said in Tokyo (UTC+9), stored as UTC instants: now is 06:00 on 5 December there.
_TOKYO_NOW = datetime(2026, 12, 4, 21)
_TOKYO_DAY = [
    RetainItem("Fed the neighbour's cat.", timestamp=datetime(2026, 12, 4, 20)),  # 05:00 today
    RetainItem("Had sushi with Ken at the harbour.", timestamp=datetime(2026, 12, 4, 8)),  # 17:00
    RetainItem("Repaired the garden fence.", timestamp=datetime(2026, 12, 3, 18)),  # 03:00
    # A day named in the text is a day on the speaker's calendar: 4 December.
    RetainItem("I went to the dentist yesterday.", timestamp=datetime(2026, 12, 4, 20)),
    RetainItem("Bought winter tyres.", timestamp=datetime(2026, 12, 3, 12)),  # 21:00, 3 Dec
]


@pytest.mark.parametrize(
    "query, in_window",
    [
        ("what did I do today?", {"cat"}),
        ("what did I do yesterday?", {"sushi", "fence", "dentist"}),
        ("what did I do on December 3?", {"tyres"}),
    ],
)
def test_a_time_question_means_the_days_of_the_users_time_zone(
    store, remember, embedder, monkeypatch, query, in_window
):
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    for item in _TOKYO_DAY:  # one call each: no item is another's lead-in
        remember([item])
    result = run(store, embedder, query, now=_TOKYO_NOW)
    words = {"cat", "sushi", "fence", "dentist", "tyres"}

    def named(texts):
        texts = list(texts)
        return {w for w in words if any(w in t for t in texts)}

    # The temporal arm's best are the day's facts (after them: their neighbours in time).
    by_temporal = sorted(
        (c for c in result.ranked if c.ranks["temporal"] is not None),
        key=lambda c: c.ranks["temporal"],
    )
    assert named(c.fact.text for c in by_temporal[: len(in_window)]) == in_window
    assert named(c.fact.text for c in result.results[: len(in_window)]) == in_window
    found = result.arms["temporal"].notes["window_facts"]
    assert found.get("in_window", found.get("listed")) == len(in_window)


def test_a_question_that_is_all_time_words_gets_the_windows_memories_whatever_they_say(
    store, remember, embedder
):
    """Before: the temporal arm kept only the window's facts within a cosine of 0.1 of the
    query, and "what happened last year?" has no topic: the year's one memory (cosine -0.06)
    was left out, and this year's came first."""
    for text, at in [
        ("I am allergic to penicillin.", datetime(2025, 5, 5, 9)),
        ("Went hiking with Ben.", datetime(2026, 11, 2, 9)),
        ("Bought a new espresso machine.", datetime(2026, 11, 20, 9)),
        ("Happened to meet Anna at the market.", datetime(2026, 10, 3, 9)),
    ]:
        remember([RetainItem(text, timestamp=at)])
    result = run(store, embedder, "what happened last year?", now=datetime(2026, 12, 4, 12))
    assert result.results[0].fact.text == "I am allergic to penicillin.", [
        c.fact.text for c in result.results
    ]


@pytest.mark.parametrize("limit", [1, 3, 7, 50])
@pytest.mark.parametrize("types", [None, ("experience",)])
def test_first_allowed_is_the_filtered_list_cut_to_the_limit(store, bare_fact, limit, types):
    """The graph and temporal arms check only as much of their ordered list as they keep:
    the same ids, in the same order, as checking all of it and cutting to the limit."""
    import random

    import numpy as np

    from memcli.recall.filters import FactFilter

    rng = np.random.default_rng(4)
    with store.atomic():
        banks = [store.banks.ensure_bank(name, NOW) for name in ("default", "other")]
        store.vectors.ensure_vectors(banks[0], "unit", None, 8)
        store.vectors.ensure_vectors(banks[1], "unit", None, 8)
        ids = [
            bare_fact(
                store,
                banks[i % 2 if i % 5 else 1],
                i,
                rng.standard_normal(8).astype(np.float32),
                NOW,
                fact_type=("world", "experience")[i % 3 == 0],
            )
            for i in range(120)
        ]
    ordered = ids[:]
    random.Random(limit).shuffle(ordered)
    flt = FactFilter(types)
    passing = flt.allowed(store, ordered, banks[0])
    expected = [f for f in ordered if f in passing][:limit]
    assert 0 < len(expected)
    assert flt.first_allowed(store, ordered, limit, banks[0]) == expected
    assert flt.first_allowed(store, [], limit, banks[0]) == []


def _life_log(day: int) -> list[RetainItem]:
    """A day of notes: errands, work and people, said over the day (a store grown by
    several imports of these)."""
    topics = [
        "Went for a run along the river before work.",
        "Standup: the migration to the new billing system slips a week.",
        "Lunch with Priya at the noodle bar; she starts at the museum in May.",
        "Booked the dentist for a filling next Thursday.",
        "Read two chapters of the book about the Lisbon earthquake.",
        "Dinner: tried the lentil curry recipe, too much salt.",
    ]
    return [
        RetainItem(f"{text} (day {day})", timestamp=datetime(2026, 10, 1 + day, 7 + 2 * i))
        for i, text in enumerate(topics)
    ]


@pytest.mark.parametrize(
    "query",
    [
        "what did I do last week?",  # the temporal arm beside the semantic one
        "who did I have lunch with on October 12?",
        "what happened yesterday?",
        "where does Priya start working?",  # no time: three arms
    ],
)
def test_the_arms_on_several_connections_recall_what_one_connection_does(
    store, remember, embedder, query, monkeypatch
):
    """The keyword, temporal and graph arms run on connections of their own beside the main
    thread, the temporal one searching with the main connection's scan of the bank's vectors.
    The result is the one a recall gets with every arm on one connection in one read."""
    from memcli.recall import pipeline

    for start in range(0, 30, 10):  # three imports: a grown store, not a fresh one
        remember([item for day in range(start, start + 10) for item in _life_log(day)])
    now = datetime(2026, 10, 31, 20)
    spread = run(store, embedder, query, now=now)
    assert spread.arms["semantic"].hits and spread.arms["graph"].hits
    if spread.time_window is not None:
        assert spread.arms["temporal"].hits
    monkeypatch.setattr(pipeline, "SPREAD_TRIES", 0)  # straight to one connection, one read
    alone = run(store, embedder, query, now=now)

    def shown(result):
        return [(c.fact_id, round(c.final, 9), c.ranks) for c in result.ranked]

    assert shown(spread) == shown(alone)
    for name in spread.arms:
        assert [h.fact_id for h in spread.arms[name].hits] == [
            h.fact_id for h in alone.arms[name].hits
        ], name


@pytest.mark.parametrize("enabled_before", [True, False])
def test_a_recall_pauses_the_cyclic_collector_and_leaves_it_as_it_was(
    store, remember, embedder, monkeypatch, enabled_before
):
    """The collector is off while a recall runs (its passes over thousands of fresh objects
    held every thread of the recall) and afterwards as the caller had it, also when the
    recall fails or two run at once."""
    import gc
    import threading

    from memcli.recall import pipeline, semantic

    remember("Booked the Lisbon trip for May.")
    seen = []
    arm = semantic.run
    monkeypatch.setattr(semantic, "run", lambda ctx: seen.append(gc.isenabled()) or arm(ctx))
    (gc.enable if enabled_before else gc.disable)()
    try:
        run(store, embedder, "Lisbon trip")
        assert seen == [False]
        assert gc.isenabled() is enabled_before
        with pytest.raises(pipeline.RecallError):
            run(store, embedder, "\x00\x01")
        assert gc.isenabled() is enabled_before
        # two at once: on until the last one is done
        inside, leave = threading.Event(), threading.Event()

        def hold() -> None:
            with pipeline.collector_paused():
                inside.set()
                leave.wait(5)

        other = threading.Thread(target=hold)
        other.start()
        inside.wait(5)
        run(store, embedder, "Lisbon trip")
        assert not gc.isenabled()  # the other pauser still runs
        leave.set()
        other.join()
        assert gc.isenabled() is enabled_before
    finally:
        gc.enable()


@pytest.mark.parametrize("closed_share", [0.0, 1 / 7, 0.5])
def test_the_semantic_arm_keeps_k_open_facts_when_closed_ones_are_nearer(
    store, bare_fact, closed_share
):
    """The semantic arm searches the fact types together and drops the facts a correction
    closed: when they are among the nearest it searches further, so it still keeps its k
    best open facts (it kept k minus the closed ones: 102 of 200 in a bank whose nearest
    facts were mostly closed)."""
    import numpy as np

    from memcli.recall import semantic
    from memcli.recall.filters import FactFilter
    from memcli.recall.types import ArmContext
    from memcli.store import FACT_TYPES

    rng = np.random.default_rng(6)
    dim, n, k = 384, 1200, 100
    query = rng.standard_normal(dim).astype(np.float32)
    query /= np.linalg.norm(query)
    with store.atomic():
        bank = store.banks.ensure_bank("default", NOW)
        store.vectors.ensure_vectors(bank, "unit", None, dim)
        ids, cosines = [], []
        for i in range(n):
            noise = rng.standard_normal(dim).astype(np.float32)
            vec = query * rng.uniform(0.3, 3.0) + noise / np.linalg.norm(noise)
            ids.append(bare_fact(store, bank, i, vec, NOW, fact_type=FACT_TYPES[i % 3]))
            cosines.append(float(vec @ query / np.linalg.norm(vec)))
        order = np.argsort(cosines)[::-1]
        nearest = [ids[i] for i in order[: 2 * k]]
        closed = nearest[:: max(1, round(1 / closed_share))] if closed_share else []
        if closed_share == 0.5:
            closed = nearest[::2]
        # Closed by a correction stored in another bank (none of the facts searched).
        other = store.banks.ensure_bank("other", NOW)
        corrector = bare_fact(store, other, n, query, NOW)
        for fact_id in closed:
            assert store.facts.close_fact(fact_id, datetime(2026, 1, 1), corrector)
    ctx = ArmContext(store, bank, "q", query, None, k, FactFilter(), RecallSettings(), NOW)
    hits = [h.fact_id for h in semantic.run(ctx).hits]
    open_ids = [ids[i] for i in order if ids[i] not in set(closed) and cosines[i] >= 0.3]
    assert len(open_ids) > k
    assert len(hits) == k
    assert not set(hits) & set(closed)
    # the k nearest open facts (the search by sign bits is approximate: nearly all)
    assert len(set(hits) & set(open_ids[:k])) >= 0.95 * k


def test_recalls_run_their_arms_on_threads_started_once(store, remember, embedder):
    """The arms' threads outlive a recall (starting and joining them was ~0.3 ms a query);
    the next recall's arms run on the same ones."""
    import threading

    from memcli.recall import pipeline

    remember("Booked the Lisbon trip for May.")
    remember("Priya starts at the museum in June.")

    def arm_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("mem-arm")}

    run(store, embedder, "Lisbon trip in May")
    first = arm_threads()
    assert 0 < len(first) <= pipeline.ARM_THREADS
    queries = ["who starts at the museum?", "what did I book last week?", "Lisbon"]
    for query in queries * 3:
        run(store, embedder, query)
    # the first recall's threads are still there and ran these too; one recall at a time
    # never needs more than its three arms' worth
    assert first <= arm_threads() and len(arm_threads()) <= pipeline.ARM_THREADS


def test_a_failing_recall_returns_only_when_its_arms_are_done(
    store, remember, embedder, monkeypatch
):
    """An arm that fails on the main thread does not leave the others running on their
    connections: the caller may close the store next."""
    import time

    from memcli.recall import keyword, semantic

    remember("Booked the Lisbon trip for May.")
    done = []
    arm = keyword.run

    def slow_keyword(ctx):
        time.sleep(0.3)
        out = arm(ctx)
        done.append(ctx.query)
        return out

    def failing_semantic(ctx, *rest):
        raise RuntimeError("the semantic arm broke")

    monkeypatch.setattr(keyword, "run", slow_keyword)
    monkeypatch.setattr(semantic, "run", failing_semantic)
    with pytest.raises(RuntimeError, match="semantic arm broke"):
        run(store, embedder, "Lisbon trip")
    assert done == ["Lisbon trip"]


def test_a_recall_does_not_wait_for_the_arms_of_recalls_in_other_threads(
    store, remember, embedder, monkeypatch
):
    """Review finding: with one pool of three threads for the process, three slow recalls
    in other threads (each its own store) held up an unrelated recall for as long as their
    keyword arms took."""
    import threading
    import time

    from memcli.recall import keyword
    from memcli.store import Store

    remember("Booked the Lisbon trip for May.")
    remember("Priya starts at the museum in June.")
    arm = keyword.run
    started = threading.Semaphore(0)
    release = threading.Event()

    def keyword_run(ctx):
        if "slow" in ctx.query:
            started.release()
            release.wait(8)  # a keyword arm that takes long (a filtered FTS5 scan)
        return arm(ctx)

    monkeypatch.setattr(keyword, "run", keyword_run)

    def go(query: str, took: list[float]) -> None:
        with Store(store.path, create=False) as own:
            t0 = time.perf_counter()
            run(own, embedder, query)
            took.append(time.perf_counter() - t0)

    go("Lisbon", [])
    slow_took: list[float] = []
    slow = [threading.Thread(target=go, args=(f"slow Lisbon {i}", slow_took)) for i in range(3)]
    for t in slow:
        t.start()
    for _ in slow:
        assert started.acquire(timeout=10)  # the three keyword arms are running
    took: list[float] = []
    try:
        go("who starts at the museum?", took)
    finally:
        release.set()
        for t in slow:
            t.join()
    assert took[0] < 2.0, f"an unrelated recall took {took[0]:.2f} s"
    assert len(slow_took) == 3
