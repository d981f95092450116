"""RRF and each boost against values computed by hand."""

from __future__ import annotations

import math
from datetime import datetime

import pytest

from memcli.models.reranker import to_probabilities
from memcli.recall import fusion, rerank, scoring
from memcli.recall.types import ArmHit, ArmResult, Candidate
from memcli.settings import RecallSettings
from memcli.store import Fact
from memcli.timeparse import TimeSpan, asks_when


def arm(name: str, ids: list[int]) -> ArmResult:
    return ArmResult(name, [ArmHit(i, 1.0) for i in ids], "test")


def fact(**kw) -> Fact:
    base = dict(
        id=1,
        text="x",
        context=None,
        fact_type="world",
        mentioned_at=datetime(2026, 1, 1),
        occurred_start=None,
        occurred_end=None,
        tags=[],
        metadata={},
        proof_count=1,
        source_id=None,
        document_id=None,
        chunk_id=None,
        entities=[],
    )
    base.update(kw)
    return Fact(**base)


def test_rrf_sums_reciprocal_ranks_with_k_60():
    fused = fusion.rrf(
        {"semantic": arm("semantic", [10, 20, 30]), "keyword": arm("keyword", [30, 10])}
    )
    by_id = {c.fact_id: c for c in fused}
    # 10: 1/61 + 1/62 ; 30: 1/63 + 1/61 ; 20: 1/62
    assert by_id[10].rrf == pytest.approx(1 / 61 + 1 / 62)
    assert by_id[30].rrf == pytest.approx(1 / 63 + 1 / 61)
    assert by_id[20].rrf == pytest.approx(1 / 62)
    assert [c.fact_id for c in fused] == [10, 30, 20]
    assert by_id[20].ranks == {
        "semantic": 2,
        "keyword": None,
        "graph": None,
        "temporal": None,
        "document": None,
    }
    assert [c.rrf_rank for c in fused] == [1, 2, 3]


def test_rrf_arm_weight_works_in_rank_space():
    fused = fusion.rrf({"keyword": arm("keyword", [5, 6])}, k=60, weights={"keyword": 2.0})
    # rank 2 with weight 2 counts as rank 1: 1 / (60 + 2 / 2)
    assert fused[1].rrf == pytest.approx(1 / 61)


def test_synthetic_scores_follow_rrf_order_from_1_to_0_1():
    assert rerank.synthetic_score(1, 5) == pytest.approx(1.0)
    assert rerank.synthetic_score(3, 5) == pytest.approx(1 - 0.9 * 2 / 4)
    assert rerank.synthetic_score(5, 5) == pytest.approx(0.1)
    assert rerank.synthetic_score(1, 1) == 1.0


def test_reranker_outputs_become_probabilities_per_batch():
    # logits: all go through the sigmoid, so order is kept (0.9 < 1.1 stays so)
    logits = to_probabilities([0.9, 1.1, -3.0, float("nan")])
    assert logits == pytest.approx(
        [1 / (1 + math.exp(-0.9)), 1 / (1 + math.exp(-1.1)), 1 / (1 + math.exp(3.0)), 0.0]
    )
    # a model that already outputs probabilities is left alone
    assert to_probabilities([0.25, 0.75]) == [0.25, 0.75]


def test_recency_boost_by_hand():
    now = datetime(2026, 11, 20)
    f = fact(mentioned_at=datetime(2026, 5, 24))  # 180 days ago
    signal = scoring.recency_signal(f, now)
    assert signal == pytest.approx(1 - 180 / 365)
    assert scoring.boost(signal, 0.2) == pytest.approx(1 + 0.2 * ((1 - 180 / 365) - 0.5))
    old = fact(mentioned_at=datetime(2020, 1, 1))
    assert scoring.recency_signal(old, now) == pytest.approx(0.1)  # clamped


def test_running_period_counts_from_its_end_and_is_capped():
    now = datetime(2026, 11, 20)
    running = fact(occurred_start=datetime(2026, 11, 1), occurred_end=datetime(2026, 12, 1))
    assert scoring.recency_signal(running, now) == 0.5
    finished = fact(occurred_start=datetime(2026, 1, 1), occurred_end=datetime(2026, 11, 10))
    assert scoring.recency_signal(finished, now) == pytest.approx(1 - 10 / 365)


def test_temporal_boost_by_hand():
    window = TimeSpan(datetime(2026, 3, 1), datetime(2026, 3, 31))  # 30 days, centre Mar 16
    f = fact(mentioned_at=datetime(2026, 3, 10))  # 6 days from the centre
    assert scoring.temporal_signal(f, window) == pytest.approx(1 - 6 / 15)
    assert scoring.temporal_signal(f, None) == 0.5
    far = fact(mentioned_at=datetime(2025, 1, 1))
    assert scoring.temporal_signal(far, window) == 0.0


def test_proof_boost_only_for_observations():
    assert scoring.proof_signal(fact()) == 0.5
    obs = fact(fact_type="observation", proof_count=5)
    assert scoring.proof_signal(obs) == pytest.approx(0.5 + math.log(5) / 10)


@pytest.mark.parametrize(
    "query, named",
    [
        ("What did Caroline paint?", {"caroline"}),
        ("caroline's painting", {"caroline"}),  # any case, possessive
        ("Did CAROLINE and Mel talk?", {"caroline", "mel"}),
        ("What did Melanie paint?", set()),  # "Mel" is not a word of it
        ("notes from the C++ team", {"c++ team"}),  # regex characters are plain text
        ("What did I paint?", set()),
        ("Remind me what Mel said", {"mel"}),  # a function-word context ("me") names nobody
    ],
)
def test_named_contexts_are_whole_words_of_the_query(query, named):
    assert scoring.named_contexts(query, ["Caroline", "Mel", "C++ team", "me"]) == named


def test_query_spans_are_runs_of_whole_words_as_written():
    assert scoring.query_spans("Did Ann-Marie call?", max_words=2) == [
        "Did",
        "Did Ann",
        "Ann",
        "Ann-Marie",
        "Marie",
        "Marie call",
        "call",
    ]
    assert "C++ team" in scoring.query_spans("notes from the C++ team")
    assert scoring.query_spans("?!") == []


@pytest.mark.parametrize(
    "query, named",
    [
        ("王磊的猫叫什么名字？", {"王磊"}),  # no space after a Chinese name
        ("王磊和李娜周末去哪儿了？", {"王磊", "李娜"}),
        ("王磊磊是谁？", {"王磊", "王磊磊"}),  # a longer name holds the shorter one
        ("猫叫什么名字？", set()),
        ("山田さんの猫の名前は？", {"山田"}),
    ],
)
def test_cjk_names_are_found_inside_the_run_they_stand_in(query, named):
    contexts = ["王磊", "李娜", "王磊磊", "山田", "Caroline"]
    found = scoring.named_contexts(query, scoring.query_spans(query) and contexts)
    assert found == named
    # and the spans looked up among the bank's contexts hold each name
    assert named <= set(scoring.query_spans(query))


def test_speaker_boost_by_hand():
    named = frozenset({"caroline"})
    assert scoring.speaker_signal(fact(context="Caroline"), named) == 1.0
    assert scoring.speaker_signal(fact(context="Mel"), named) == 0.0
    assert scoring.speaker_signal(fact(context=None), named) == 0.0
    assert scoring.speaker_signal(fact(context="Mel"), frozenset()) == 0.5
    now = datetime(2026, 1, 1)
    said, other = Candidate(1, {}, {}, base=0.5), Candidate(2, {}, {}, base=0.6)
    said.fact, other.fact = fact(id=1, context="Caroline"), fact(id=2, context="Mel")
    ranked = scoring.apply([other, said], now, None, RecallSettings(), named=named)
    # 0.5 x 1.2 x recency > 0.6 x 0.8 x recency: the named speaker's memory moves up
    assert [c.fact_id for c in ranked] == [1, 2]
    assert (said.speaker, other.speaker) == pytest.approx((1.2, 0.8))


@pytest.mark.parametrize(
    ("query", "asks"),
    [
        ("When did Caroline go to the support group?", True),
        ("  when is my flight", True),
        ("What year did Tim move to Berlin?", True),
        ("Which day is the dentist?", True),
        ("In what month was the wedding?", True),
        ("What time do I usually go to the gym?", True),
        ("How long ago did I start running?", True),
        ("How many days passed between the festival and the mass?", True),
        ("我什么时候要去看牙医？", True),
        ("王磊哪天加班到十一点？", True),
        ("誕生日はいつ？", True),
        ("생일이 언제야?", True),
        ("What did I say when we met?", False),  # "when" opening a clause, not the question
        ("What did Caroline paint?", False),
        ("How long have I been running?", True),  # since when
        ("How many books did I read this year?", False),
        ("Whenever I travel, what do I pack?", False),
        ("王磊的猫叫什么？", False),
    ],
)
def test_a_question_that_asks_when(query, asks):
    assert asks_when(query) is asks


def test_when_boost_by_hand():
    """A question that asks when, with no window of its own: a memory that says a time
    moves above one that only talks about the topic when their bases are near."""
    assert scoring.stated_time_signal(fact(occurred_start=datetime(2026, 5, 7))) == 1.0
    assert scoring.stated_time_signal(fact()) == 0.0
    now = datetime(2026, 11, 20)

    def ranked(settings, window=None, asks=True):
        about = Candidate(1, {}, {}, base=1.0)
        says_when = Candidate(2, {}, {}, base=0.85)
        about.fact = fact(id=1)
        says_when.fact = fact(
            id=2, occurred_start=datetime(2026, 5, 7), occurred_end=datetime(2026, 5, 8)
        )
        out = scoring.apply([about, says_when], now, window, settings, asks_when=asks)
        return [c.fact_id for c in out], (about.temporal, says_when.temporal)

    order, factors = ranked(RecallSettings())
    alpha = RecallSettings().when_alpha
    assert factors == pytest.approx((1 - alpha / 2, 1 + alpha / 2))
    assert order == [2, 1]  # 0.85 x 1.1 > 1.0 x 0.9
    # Not asked when, or switched off: the topic's order stands, no temporal boost.
    assert ranked(RecallSettings(), asks=False) == ([1, 2], (1.0, 1.0))
    assert ranked(RecallSettings(when_alpha=0.0)) == ([1, 2], (1.0, 1.0))
    # A question that names its window is boosted by the window, as any time question.
    may = TimeSpan(datetime(2026, 5, 1), datetime(2026, 6, 1))
    _, (about, says_when) = ranked(RecallSettings(), window=may)
    assert about == pytest.approx(
        scoring.boost(scoring.temporal_signal(fact(), may), RecallSettings().temporal_alpha)
    )


def test_final_score_is_the_product_of_base_and_boosts():
    now = datetime(2026, 11, 20)
    c = Candidate(1, {}, {}, base=0.8)
    c.fact = fact(fact_type="observation", proof_count=3, mentioned_at=datetime(2026, 11, 20))
    scoring.apply([c], now, None, RecallSettings())
    recency = 1 + RecallSettings().recency_alpha * (1.0 - 0.5)
    temporal = 1.0
    proof = 1 + 0.1 * (0.5 + math.log(3) / 10 - 0.5)
    assert c.final == pytest.approx(0.8 * recency * temporal * proof)
    scoring.apply([c], now, None, RecallSettings(), enabled=False)
    assert c.final == pytest.approx(0.8)


def test_score_fusion_is_a_weighted_mean_of_min_max_scores():
    sem = ArmResult("semantic", [ArmHit(1, 0.9), ArmHit(2, 0.6), ArmHit(3, 0.3)], "cosine")
    kw = ArmResult("keyword", [ArmHit(3, 12.0), ArmHit(2, 4.0)], "bm25")
    fused = fusion.fuse(
        {"semantic": sem, "keyword": kw}, "scores", 60, {}, {"semantic": 1.0, "keyword": 3.0}
    )
    by_id = {c.fact_id: c.fused for c in fused}
    # semantic min-max: 1 -> 1.0, 2 -> 0.5, 3 -> 0.0 ; keyword: 3 -> 1.0, 2 -> 0.0
    assert by_id[1] == pytest.approx((1 * 1.0 + 3 * 0.0) / 4)
    assert by_id[2] == pytest.approx((1 * 0.5 + 3 * 0.0) / 4)
    assert by_id[3] == pytest.approx((1 * 0.0 + 3 * 1.0) / 4)
    assert [c.fact_id for c in fused] == [3, 1, 2]
    assert [c.rrf_rank for c in fused] == [1, 2, 3]
    # RRF is still computed for the trace: 3 is rank 3 + rank 1
    assert next(c for c in fused if c.fact_id == 3).rrf == pytest.approx(1 / 63 + 1 / 61)


def test_fused_share_is_the_synthetic_base_without_a_reranker():
    cands = fusion.fuse({"keyword": arm("keyword", [7, 8])}, "rrf", 60, {}, {})
    rerank.apply(cands, "q", None, cap=50, synthetic="fused")
    assert [c.base for c in cands] == pytest.approx([1.0, (1 / 62) / (1 / 61)])


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo", "America/New_York", "Pacific/Kiritimati"])
def test_temporal_signal_skips_only_conversions_that_cannot_matter(monkeypatch, zone):
    """A fact said more than a day outside the window scores 0 without its local time being
    worked out; against converting every one, on random facts and windows."""
    import random
    from datetime import timedelta

    from memcli.clock import utc_to_local

    monkeypatch.setenv("TZ", zone)
    rng = random.Random(3)
    base = datetime(2026, 3, 1)
    for _ in range(400):
        said = base + timedelta(hours=rng.randrange(0, 24 * 60))
        start = base + timedelta(hours=rng.randrange(0, 24 * 60))
        window = TimeSpan(start, start + timedelta(hours=rng.choice([1, 24, 24 * 7])),
                          open_ended=rng.random() < 0.3)  # fmt: skip
        # The same instant given as a period of its local time: always converted.
        as_local = fact(mentioned_at=said, occurred_start=utc_to_local(said))
        assert scoring.temporal_signal(fact(mentioned_at=said), window) == (
            scoring.temporal_signal(as_local, window)
        )


@pytest.mark.parametrize(
    "said, window",
    [
        (datetime(9999, 12, 30, 10), TimeSpan(datetime(9999, 12, 30), datetime(9999, 12, 31))),
        (datetime(9999, 12, 31, 23), TimeSpan(datetime(9999, 12, 31), datetime.max)),
        (datetime(1, 1, 2, 10), TimeSpan(datetime(1, 1, 1), datetime(1, 1, 8))),
        (datetime(1, 1, 1), TimeSpan(datetime(1, 1, 1), datetime(1, 1, 2), open_ended=True)),
    ],
    ids=["yesterday-9999", "last-day", "week-of-year-1", "open-year-1"],
)
def test_temporal_signal_of_a_window_at_the_ends_of_the_calendar(said, window):
    """Review finding: a window within a day of datetime's ends overflowed when widened by
    the day no zone is away from UTC ("what happened yesterday?" said at 9999-12-31)."""
    signal = scoring.temporal_signal(fact(mentioned_at=said), window)
    assert 0.0 <= signal <= 1.0
    assert signal > 0.0  # said inside the window


@pytest.mark.parametrize(
    "start, end, fit",
    [
        ((2026, 6, 1), (2026, 6, 1), 1.0),  # a point inside
        ((2026, 5, 1), (2026, 5, 1), 1.0),  # a point at the start: inside (half-open)
        ((2026, 4, 1), (2026, 5, 1), 0.5),  # April ends where the window starts: just outside
        ((2026, 3, 2), (2026, 3, 2), 0.5 * (1 - 60 / 60)),  # 60 days before: 0
        ((2026, 4, 1), (2026, 4, 1), 0.5 * (1 - 30 / 60)),  # 30 days before: half way down
        ((2026, 12, 4, 12), (2026, 12, 4, 12), 0.5),  # a point at the end: outside
    ],
)
def test_an_open_window_fits_inside_it_by_its_half_open_edges(start, end, fit):
    """Review finding: an April period (ending, exclusive, on 1 May) fitted "since May" as 1,
    and the fit outside reached 0 at 30 days, not the 60 of OPEN_WINDOW_FALLOFF."""
    from memcli.recall.temporal import proximity

    window = TimeSpan(datetime(2026, 5, 1), datetime(2026, 12, 4, 12), open_ended=True)
    assert proximity(datetime(*start), datetime(*end), window) == pytest.approx(fit)
