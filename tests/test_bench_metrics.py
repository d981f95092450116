"""Each bench metric against hand-computed values on tiny lists, arithmetic in the comments."""

from __future__ import annotations

import json
import math

import pytest

from memcli.bench import metrics as m
from memcli.bench.report import format_table, to_json

# Ranked list used throughout; "a" repeats (two facts of one item) and must count once.
#   raw:     a  x  a  b  y  c  z
#   deduped: a  x  b  y  c  z      -> ranks a=1, x=2, b=3, y=4, c=5, z=6
RANKED = ["a", "x", "a", "b", "y", "c", "z"]
GOLD = {"a", "b", "c", "d"}  # "d" is never retrieved


def test_dedupe_ranked_keeps_first_rank() -> None:
    assert m.dedupe_ranked(RANKED) == ["a", "x", "b", "y", "c", "z"]
    assert m.dedupe_ranked([]) == []


def test_map_ranked_to_sessions() -> None:
    # a->S1, x->S2, b->S1, y->None (dropped), c->S3; z unmapped (dropped)
    mapping = {"a": "S1", "x": "S2", "b": "S1", "y": None, "c": "S3"}
    assert m.map_ranked(RANKED, mapping) == ["S1", "S2", "S3"]


def test_recall_at_k() -> None:
    # top3 deduped = a x b -> gold in it: a, b -> 2/4
    assert m.recall_at_k(RANKED, GOLD, 3) == pytest.approx(0.5)
    # top1 = a -> 1/4
    assert m.recall_at_k(RANKED, GOLD, 1) == pytest.approx(0.25)
    # top10 = all 6 -> a b c -> 3/4 ("d" never retrieved)
    assert m.recall_at_k(RANKED, GOLD, 10) == pytest.approx(0.75)
    # without dedupe top3 would be a x a -> 1/4; dedupe makes it 2/4
    assert m.recall_at_k(["a", "a", "a", "b"], {"a", "b"}, 2) == pytest.approx(1.0)


def test_hit_any_and_recall_all() -> None:
    # top1 = a -> a is gold -> hit 1
    assert m.hit_any_at_k(RANKED, GOLD, 1) == 1.0
    # gold {b}: b is at rank 3 -> miss at k=2 (a x), hit at k=3 (a x b)
    assert m.hit_any_at_k(RANKED, {"b"}, 2) == 0.0
    assert m.hit_any_at_k(RANKED, {"b"}, 3) == 1.0
    # all of {a, b, c} in top5 (a x b y c) -> 1; in top4 (a x b y) c missing -> 0
    assert m.recall_all_at_k(RANKED, {"a", "b", "c"}, 5) == 1.0
    assert m.recall_all_at_k(RANKED, {"a", "b", "c"}, 4) == 0.0
    # "d" never retrieved -> never all
    assert m.recall_all_at_k(RANKED, GOLD, 100) == 0.0


def test_reciprocal_rank() -> None:
    # first gold "a" at rank 1 -> 1/1
    assert m.reciprocal_rank(RANKED, GOLD) == 1.0
    # gold {b}: rank 3 in deduped list (a x b) -> 1/3 (raw list would say 1/4)
    assert m.reciprocal_rank(RANKED, {"b"}) == pytest.approx(1 / 3)
    # gold {c} at rank 5; with cut-off k=4 it is not found -> 0
    assert m.reciprocal_rank(RANKED, {"c"}) == pytest.approx(1 / 5)
    assert m.reciprocal_rank(RANKED, {"c"}, k=4) == 0.0
    assert m.reciprocal_rank(RANKED, {"d"}) == 0.0


def test_ndcg_at_k() -> None:
    # k=3, top3 a x b, relevance 1 0 1:
    #   DCG  = 1/log2(2) + 1/log2(4) = 1 + 0.5 = 1.5
    #   IDCG = min(3, 4) = 3 ones: 1/log2(2) + 1/log2(3) + 1/log2(4) = 1 + 0.63093 + 0.5
    #   nDCG = 1.5 / 2.13093 = 0.70392
    expected = 1.5 / (1 + 1 / math.log2(3) + 0.5)
    assert m.ndcg_at_k(RANKED, GOLD, 3) == pytest.approx(expected)
    assert m.ndcg_at_k(RANKED, GOLD, 3) == pytest.approx(0.70392, abs=1e-5)
    # single gold "b" at rank 3, k=5: DCG = 1/log2(4) = 0.5, IDCG = 1 -> 0.5
    assert m.ndcg_at_k(RANKED, {"b"}, 5) == pytest.approx(0.5)
    # perfect ranking -> 1
    assert m.ndcg_at_k(["a", "b"], {"a", "b"}, 10) == pytest.approx(1.0)


def test_candidate_recall_and_ranking_loss() -> None:
    # candidates found a, b, c, plus noise -> 3/4 of gold
    cands = ["a", "b", "c", "q", "r"]
    assert m.candidate_recall(cands, GOLD) == pytest.approx(0.75)
    # rankingLoss@3 = candidateRecall - recall@3 = 0.75 - 0.5 = 0.25
    out = m.question_metrics(RANKED, GOLD, [3], candidates=cands)
    assert out["rankingLoss@3"] == pytest.approx(0.25)


def test_budget_loss() -> None:
    # top5 = a x b y c, gold in it = a b c; the budget kept only a and x
    #   -> b and c ranked in but cut -> 2/4 = 0.5
    assert m.budget_loss(RANKED, ["a", "x"], GOLD, 5) == pytest.approx(0.5)
    # k=2: top2 = a x, gold in it = a, kept -> nothing lost
    assert m.budget_loss(RANKED, ["a", "x"], GOLD, 2) == 0.0
    # gold cut but never ranked in the top k is ranking loss, not budget loss: c at rank 5
    assert m.budget_loss(RANKED, [], {"c"}, 4) == 0.0


def test_arm_contributions() -> None:
    # gold a b c d; fts found a b, vec found b c, graph found nothing
    arms = {"fts": ["a", "b", "x"], "vec": ["b", "c"], "graph": ["z"]}
    out = m.arm_contributions(arms, GOLD)
    # fts: found {a,b} = 2/4; only-found {a} = 1/4
    assert out["fts"] == {"candidateRecall": 0.5, "uniqueRecall": 0.25}
    # vec: found {b,c} = 2/4; only-found {c} = 1/4
    assert out["vec"] == {"candidateRecall": 0.5, "uniqueRecall": 0.25}
    assert out["graph"] == {"candidateRecall": 0.0, "uniqueRecall": 0.0}


def test_content_words_rule() -> None:
    # stopwords gone, apostrophe removed, plural "s" stripped, "class" keeps its "ss"
    assert m.content_words("The dogs of Alice's class") == {"dog", "alice", "class"}


def test_checklist_coverage() -> None:
    texts = ["Alice moved to Lisbon in March 2024.", "She adopted two dogs."]
    checklist = [
        "Alice lives in Lisbon",  # words {alice, live, lisbon}: "live" missing -> 2/3 < 0.8 no
        "Alice moved to Lisbon",  # {alice, moved, lisbon}: 3/3 -> covered
        "adopted a dog",  # {adopted, dog}: 2/2 (dogs -> dog) -> covered
        # {alice, moved, lisbon, march, 2024, berlin}: 5/6 = 0.83 >= 0.8 -> covered
        "Alice moved from Berlin to Lisbon in March 2024",
        "the and of",  # only stopwords -> falls back to all words, none present -> not covered
        "!!!",  # no words at all -> ignored
    ]
    # scored 5 points, covered 3 -> 0.6
    assert m.checklist_coverage(texts, checklist) == pytest.approx(0.6)
    with pytest.raises(ValueError):
        m.checklist_coverage(texts, ["..."])


def test_distractor_rate() -> None:
    # returned deduped = a x b y c z; distractors x, z -> 2/6
    assert m.distractor_rate(RANKED, {"x", "z"}) == pytest.approx(2 / 6)
    # top3 = a x b -> 1/3
    assert m.distractor_rate(RANKED, {"x", "z"}, k=3) == pytest.approx(1 / 3)
    assert m.distractor_rate([], {"x"}) == 0.0


def test_empty_gold_and_bad_k_raise() -> None:
    for fn in (m.recall_at_k, m.hit_any_at_k, m.recall_all_at_k, m.ndcg_at_k):
        with pytest.raises(ValueError):
            fn(RANKED, set(), 3)
        with pytest.raises(ValueError):
            fn(RANKED, GOLD, 0)
    with pytest.raises(ValueError):
        m.candidate_recall(["a"], [])


def test_question_metrics_names() -> None:
    out = m.question_metrics(
        RANKED,
        GOLD,
        [1, 3],
        candidates=["a", "b", "c"],
        kept=["a"],
        texts=["alice"],
        checklist=["Alice"],
        distractors={"x"},
    )
    assert set(out) == {
        "candidateRecall",
        "recall@1",
        "recall@3",
        "hitAny@1",
        "hitAny@3",
        "recall_all@1",
        "recall_all@3",
        "nDCG@1",
        "nDCG@3",
        "rankingLoss@1",
        "rankingLoss@3",
        "budgetLoss@1",
        "budgetLoss@3",
        "MRR",
        "checklistCoverage",
        "distractorRate",
    }
    # budgetLoss@3: top3 a x b, gold a b, kept a -> b lost -> 1/4
    assert out["budgetLoss@3"] == pytest.approx(0.25)
    # distractorRate over top 10 = all 6 deduped ids, x is a distractor -> 1/6
    assert out["distractorRate"] == pytest.approx(1 / 6)


def test_percentiles() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20
    # median of 1..20 = (10 + 11) / 2
    assert m.p50(values) == 10.5
    # nearest rank: ceil(0.95 * 20) = 19 -> 19th smallest = 19
    assert m.p95(values) == 19.0
    # n=3: ceil(0.95 * 3) = 3 -> the maximum
    assert m.p95([5.0, 1.0, 3.0]) == 5.0
    assert m.p95([7.0]) == 7.0
    with pytest.raises(ValueError):
        m.p95([])


def _aggregated() -> dict:
    agg = m.Aggregator(ks=[10, 1])
    agg.count("questions", 3)
    agg.count("skipped:no-gold")
    agg.add({"recall@1": 1.0, "recall@10": 1.0, "checklistCoverage": 0.5}, category="2")
    agg.add({"recall@1": 0.0, "recall@10": 0.5, "checklistCoverage": None}, category="10")
    agg.add({"recall@1": 0.5, "recall@10": 0.0}, category="2")
    agg.add({"recall@10": 1.0}, category="2", level="session")
    agg.add_arm("fts", {"candidateRecall": 1.0, "uniqueRecall": 0.5})
    agg.add_arm("fts", {"candidateRecall": 0.0, "uniqueRecall": 0.0})
    for ms in (1.0, 2.0, 3.0, 4.0):
        agg.add_latency("recall", ms)
    return agg.summary(meta={"dataset": "tiny"})


def test_aggregator_summary() -> None:
    s = _aggregated()
    assert s["ks"] == [1, 10]
    assert s["counts"] == {"questions": 3, "skipped:no-gold": 1}
    item = s["levels"]["item"]
    # overall recall@1 = (1 + 0 + 0.5) / 3 = 0.5; recall@10 = (1 + 0.5 + 0) / 3 = 0.5
    assert item["overall"]["n"] == 3
    assert item["overall"]["metrics"]["recall@1"] == pytest.approx(0.5)
    assert item["overall"]["metrics"]["recall@10"] == pytest.approx(0.5)
    # checklist only defined once (None is "not applicable") -> mean 0.5 over 1
    assert item["overall"]["metrics"]["checklistCoverage"] == pytest.approx(0.5)
    assert item["overall"]["metric_n"]["checklistCoverage"] == 1
    # category "2": recall@1 = (1 + 0.5) / 2 = 0.75; numeric sort puts "2" before "10"
    assert list(item["categories"]) == ["2", "10"]
    assert item["categories"]["2"]["metrics"]["recall@1"] == pytest.approx(0.75)
    # arm fts: candidateRecall (1 + 0) / 2 = 0.5, uniqueRecall (0.5 + 0) / 2 = 0.25
    assert item["arms"]["fts"]["metrics"] == {"candidateRecall": 0.5, "uniqueRecall": 0.25}
    assert s["levels"]["session"]["overall"]["metrics"] == {"recall@10": 1.0}
    # latency 1..4 ms: median (2 + 3) / 2 = 2.5; p95 rank ceil(3.8) = 4 -> 4.0; mean 2.5
    assert s["latency_ms"]["recall"] == {"n": 4, "p50": 2.5, "p95": 4.0, "mean": 2.5}
    json.loads(to_json(s))  # the --out file is plain JSON


def test_format_table() -> None:
    text = format_table(_aggregated())
    lines = text.splitlines()
    assert lines[0] == "mem bench  dataset=tiny"
    assert "level: item" in text and "level: session" in text
    header = next(line for line in lines if line.lstrip().startswith("n "))
    # columns only for measured metrics: no MRR/nDCG/losses; cand and only come from the arm
    assert header.split() == ["n", "cand", "R@1", "R@10", "chk", "only"]
    overall = next(line for line in lines if line.startswith("overall"))
    assert overall.split() == ["overall", "3", "-", "0.500", "0.500", "0.500", "-"]
    assert any(line.split()[:3] == ["cat", "10", "1"] for line in lines)
    arm = next(line for line in lines if line.startswith("arm fts"))
    assert arm.split() == ["arm", "fts", "2", "0.500", "-", "-", "-", "0.250"]
    assert any(line.split() == ["recall", "4", "2.5", "4.0"] for line in lines)
    # fixed width: all rows of the item table line up with its rule
    rule = next(line for line in lines if set(line) == {"-"})
    assert all(len(line) <= len(rule) for line in lines[2:8])


def test_format_table_empty_summary() -> None:
    assert format_table({}) == "\n"
    assert "phase" in format_table({"latency_ms": {"retain": {"n": 1, "p50": 1, "p95": 1}}})
