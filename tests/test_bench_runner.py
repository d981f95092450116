"""`mem bench` end to end on a hand-made JSONL benchmark with the real embedder.

The data is small enough to reason about: each question has a known gold item, one gold item
is reachable only by its exact rare code (keyword arm), one question has no gold (skipped and
counted), and a checklist and a distractor exercise the content metrics. The checks are the
invariants the report relies on, not exact scores, so a ranking change elsewhere does not
break them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from memcli.bench.command import bench
from memcli.bench.datasets import read_dataset
from memcli.bench.runner import LOSS_CLASSES, BenchOptions, CachingEmbedder, run_bench

KS = (1, 5, 10)
# A rare code at the end of a long, unrelated turn: MiniLM puts the query "KQ7Z" below the
# semantic arm's cosine floor (measured ~0.14), so only the keyword arm can find it.
CODE = "KQ7Z"

ITEMS = [
    ("m0", "Alice lived in Porto until last year and worked at a bakery.", "2024-01-10", "s1"),
    ("m1", "Alice moved to Lisbon in March to start a job at a design studio.", "2024-03-05", "s1"),
    ("m2", "Bob adopted a golden retriever puppy and named him Biscuit.", "2024-03-20", "s2"),
    (
        "m3",
        "Our team lunch went long because everyone wanted dessert, and afterwards we walked "
        f"along the river and talked about holidays, kids and football. Ticket ref {CODE}.",
        "2024-04-02",
        "s2",
    ),
    ("m4", "Carol ran the Berlin half marathon in under two hours.", "2024-04-14", "s3"),
    ("m5", "Dan is learning to bake sourdough bread on weekends.", "2024-04-20", "s3"),
    ("m6", "Erin repainted her kitchen a pale shade of green.", "2024-05-01", "s3"),
    ("m7", "Frank booked flights to Tokyo for the cherry blossom season.", "2024-05-09", "s4"),
    ("m8", "Grace started taking cello lessons from a retired violinist.", "2024-05-15", "s4"),
]

QUESTIONS = [
    {
        "id": "q-alice",
        "query": "Which city does Alice live in now?",
        "category": "single",
        "gold": ["m1"],
        "checklist": ["Alice moved to Lisbon"],
        "distractors": ["m0"],
    },
    {
        "id": "q-dog",
        "query": "What is the name of Bob's dog?",
        "category": "single",
        "gold": ["m2"],
    },
    {"id": "q-code", "query": CODE, "category": "keyword", "gold": ["m3"]},
    {
        "id": "q-multi",
        "query": "Who got a new pet and who ran a race?",
        "category": "multi",
        "gold": ["m2", "m4"],
    },
    {"id": "q-empty", "query": "What did nobody say?", "category": "single", "gold": []},
]


def write_benchmark(path: Path) -> Path:
    lines = [
        {"type": "item", "id": i, "text": t, "timestamp": f"{d}T10:00:00Z", "session": s}
        for i, t, d, s in ITEMS
    ]
    lines += [{"type": "question", "now": "2024-06-01T12:00:00Z", **q} for q in QUESTIONS]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_benchmark(tmp_path_factory.mktemp("bench") / "tiny.jsonl")


def run(dataset: Path, embedder, **overrides) -> dict:
    options = BenchOptions(dataset=str(dataset), format="jsonl", ks=KS, **overrides)
    return run_bench(read_dataset(dataset, "jsonl"), options, embedder=embedder)


@pytest.fixture(scope="module")
def full(dataset: Path, embedder) -> dict:
    return run(dataset, embedder)


def rows_by_id(summary: dict) -> dict[str, dict]:
    return {row["id"]: row for row in summary["questions"]}


def test_summary_shape_and_counts(full):
    assert set(full) >= {"meta", "ks", "counts", "levels", "latency_ms", "losses", "questions"}
    assert full["ks"] == list(KS)
    assert full["meta"]["format"] == "jsonl"
    assert full["meta"]["options"]["arms"] == [
        "semantic",
        "keyword",
        "graph",
        "temporal",
        "document",
    ]
    counts = full["counts"]
    assert counts["scored:item"] == 4
    assert counts["skipped:no-gold"] == 1
    assert counts["cases"] == 1 and counts["items"] == len(ITEMS)
    # session level is LongMemEval's protocol only; "shown" scores what recall printed
    assert list(full["levels"]) == ["item", "shown"]
    item = full["levels"]["item"]
    assert item["overall"]["n"] == 4
    assert set(item["categories"]) == {"keyword", "multi", "single"}
    assert list(item["arms"]) == ["semantic", "keyword", "graph", "temporal", "document"]
    for phase in ("retain", "semantic", "keyword", "fusion", "rerank", "recall"):
        assert full["latency_ms"][phase]["p50"] >= 0
    rows = rows_by_id(full)
    assert rows["q-empty"]["skipped"] == "no-gold"
    alice = rows["q-alice"]
    assert alice["gold"] == ["m1"] and len(alice["ranked"]) <= 20
    assert set(alice["ranks"]["m1"]) == {
        "fused",
        "semantic",
        "keyword",
        "graph",
        "temporal",
        "document",
    }
    metrics = item["overall"]["metrics"]
    assert item["overall"]["metric_n"]["checklistCoverage"] == 1
    assert 0.0 <= metrics["distractorRate"] <= 1.0


def test_loss_split_adds_up(full):
    """cand >= R@k, rankingLoss = cand - R@k, and the per-gold classes agree with the means."""
    item = full["levels"]["item"]
    for row in [item["overall"], *item["categories"].values()]:
        m = row["metrics"]
        for k in KS:
            assert m["candidateRecall"] >= m[f"recall@{k}"] - 1e-9
            assert m[f"rankingLoss@{k}"] == pytest.approx(m["candidateRecall"] - m[f"recall@{k}"])
            assert m[f"budgetLoss@{k}"] <= m[f"recall@{k}"] + 1e-9
    losses = full["losses"]
    assert losses["k"] == 10
    assert sum(losses["overall"].values()) == 5  # gold items over the scored questions
    for row in full["questions"]:
        for gold_id, loss in row.get("loss", {}).items():
            assert loss in LOSS_CLASSES
            fused = row["ranks"][gold_id]["fused"]
            if loss == "never_candidate":
                assert fused is None
            elif loss == "ranked_out":
                assert fused is not None and fused > 10
            else:
                assert fused is not None and fused <= 10
    # With a 4096-token budget nothing this small is cut.
    assert losses["overall"]["budget_cut"] == 0


def test_keyword_only_gold(full):
    """The rare code is found by the keyword arm; the meaning-based arms cannot see it."""
    ranks = rows_by_id(full)["q-code"]["ranks"]["m3"]
    assert ranks["keyword"] == 1
    assert ranks["semantic"] is None and ranks["graph"] is None
    category = full["levels"]["item"]["categories"]["keyword"]
    assert category["metrics"]["candidateRecall"] == 1.0
    assert full["levels"]["item"]["arms"]["keyword"]["metrics"]["uniqueRecall"] > 0


def test_tiny_budget_shows_budget_loss(dataset, embedder):
    summary = run(dataset, embedder, max_tokens=20)
    metrics = summary["levels"]["item"]["overall"]["metrics"]
    assert metrics["budgetLoss@10"] > 0
    assert summary["losses"]["overall"]["budget_cut"] > 0
    assert all(row["kept"] <= 1 for row in summary["questions"] if "kept" in row)


def test_arm_ablation_changes_arm_numbers(full, dataset, embedder):
    only_keyword = run(dataset, embedder, arms=("keyword",))
    arms = only_keyword["levels"]["item"]["arms"]
    assert list(arms) == ["keyword"]
    kw = arms["keyword"]["metrics"]
    # Alone, everything the arm finds it finds alone; with all four arms it shares the gold.
    assert kw["uniqueRecall"] == pytest.approx(kw["candidateRecall"])
    full_kw = full["levels"]["item"]["arms"]["keyword"]["metrics"]
    assert full_kw["uniqueRecall"] < kw["uniqueRecall"]
    assert only_keyword["levels"]["item"]["overall"]["metrics"]["candidateRecall"] == (
        pytest.approx(kw["candidateRecall"])
    )
    assert rows_by_id(only_keyword)["q-code"]["loss"]["m3"] == "hit"


def test_caching_embedder_embeds_each_text_once(embedder):
    """LongMemEval haystacks repeat sessions across questions: a repeat must not re-embed."""
    calls: list[list[str]] = []

    class Counting:
        name, dim = embedder.name, embedder.dim

        def embed(self, texts):
            calls.append(list(texts))
            return embedder.embed(texts)

    cached = CachingEmbedder(Counting(), max_entries=10)
    first = cached.embed(["a cat", "a dog", "a cat"])
    second = cached.embed(["a dog", "a bird"])
    assert calls == [["a cat", "a dog"], ["a bird"]]
    assert (first[1] == second[0]).all() and (first[0] == first[2]).all()
    assert cached.name == embedder.name and (cached.hits, cached.misses) == (2, 3)


def make_app() -> typer.Typer:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(bench)
    return app


def test_missing_dataset_skips(tmp_path):
    missing = tmp_path / "nope.json"
    result = CliRunner().invoke(make_app(), ["--dataset", str(missing)])
    assert result.exit_code == 0
    assert "skip" in result.output and "nope.json" in result.output
    strict = CliRunner().invoke(make_app(), ["--dataset", str(missing), "--strict"])
    assert strict.exit_code == 1
    assert "skip" in strict.output


def test_command_prints_table_and_writes_json(dataset, embedder, tmp_path):
    out = tmp_path / "report.json"
    args = ["--dataset", str(dataset), "--k", "1,5,10", "--arms", "semantic,keyword"]
    extra = ["--no-boosts", "--setting", "rrf_k=30", "--out", str(out)]
    result = CliRunner().invoke(make_app(), [*args, *extra])
    assert result.exit_code == 0, result.output
    assert "arm keyword" in result.stdout and "R@10" in result.stdout
    report = json.loads(out.read_text())
    assert report["meta"]["options"]["boosts"] is False
    assert report["meta"]["options"]["arms"] == ["semantic", "keyword"]
    assert report["meta"]["options"]["settings"] == {"rrf_k": 30}
    assert {row["id"] for row in report["questions"]} == {q["id"] for q in QUESTIONS}
    bad = CliRunner().invoke(make_app(), ["--dataset", str(dataset), "--arms", "vector"])
    assert bad.exit_code == 2
    typo = CliRunner().invoke(make_app(), ["--dataset", str(dataset), "--setting", "rrfk=30"])
    assert typo.exit_code == 2 and "unknown recall setting" in typo.output


def test_a_lone_surrogate_fails_before_the_run_and_keeps_the_old_report(tmp_path):
    """A question's "\\ud800" escape passed the reader and failed at the end (the report
    could not be encoded), after --out had already truncated the previous report."""
    dataset = tmp_path / "broken.jsonl"
    rows = [
        {
            "type": "item",
            "case": "c",
            "id": "m1",
            "text": "The key is here.",
            "timestamp": "2024-01-01",
        },
        {"type": "question", "case": "c", "id": "q1", "query": "where? \ud800", "gold": ["m1"]},
    ]
    dataset.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "report.json"
    out.write_text('{"kept": true}')
    result = CliRunner().invoke(make_app(), ["--dataset", str(dataset), "--out", str(out)])
    assert result.exit_code == 1
    assert "lone surrogate" in result.output and "q1" in result.output
    assert out.read_text() == '{"kept": true}'


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ("recency_alpha=abc", "recency_alpha must be a number"),
        ("recency_alpha=[1]", "recency_alpha must be a number"),
        ("recency_alpha=true", "recency_alpha must be a number"),
        ("recency_alpha=Infinity", "recency_alpha must be a finite number"),
        ("recency_alpha=NaN", "recency_alpha must be a finite number"),
        ("rrf_k=2.5", "rrf_k must be a whole number"),
        ("rrf_k=x", "rrf_k must be a whole number"),
        ("fusion=3", "fusion must be text"),
        ("fusion=bogus", "fusion must be one of scores, rrf"),
        ("synthetic=bogus", "synthetic must be one of fused, linear"),
        ("keyword_cjk_terms=pairs", "keyword_cjk_terms must be one of both, bigram"),
        ('score_weights={"semantic": "a"}', "score_weights must map arm names to finite numbers"),
        ('score_weights={"vector": 1}', "score_weights must map arm names to finite numbers"),
        ("score_weights=1", "score_weights must map arm names to finite numbers"),
        # of the right kind, out of range: a division by zero or a negative count mid-run
        ('arm_weights={"semantic": 0}', "arm_weights must map arm names to numbers above 0"),
        ('score_weights={"graph": -1}', "score_weights must map arm names to numbers of 0 or"),
        ("temporal_buckets=0", "temporal_buckets must be at least 1"),
        ("rrf_k=-1", "rrf_k must be at least 0"),
        ("recency_horizon_days=0", "recency_horizon_days must be above 0"),
        ("temporal_rounds=-2", "temporal_rounds must be at least 0"),
        ("keyword_cjk_char_max_share=1.5", "keyword_cjk_char_max_share must be between 0 and 1"),
    ],
)
def test_a_setting_of_the_wrong_kind_is_a_usage_error_before_the_run(tmp_path, setting, says):
    """--setting values are JSON: one of another kind than the setting's default (text for a
    number, Infinity, a fraction for a count) failed mid-run with "unexpected TypeError", or
    ran on with NaN scores."""
    dataset = tmp_path / "tiny.jsonl"
    dataset.write_text(
        '{"type": "item", "case": "c", "id": "m", "text": "Went to Lisbon in May."}\n'
        '{"type": "question", "case": "c", "id": "q", "query": "Lisbon", "gold": ["m"]}\n'
    )
    args = ["--dataset", str(dataset), "--format", "jsonl", "--setting", setting]
    result = CliRunner().invoke(make_app(), args)
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert "Traceback" not in result.output


def test_every_default_setting_passes_its_own_check():
    from dataclasses import fields

    from memcli.bench.runner import recall_settings
    from memcli.settings import RecallSettings

    defaults = RecallSettings()
    given = {f.name: getattr(defaults, f.name) for f in fields(RecallSettings)}
    assert recall_settings(given) == defaults


def test_the_shown_level_scores_what_recall_printed(dataset, embedder, full):
    """ "shown" is the item level over the printed results: with room for everything it
    keeps every gold the ranking has in its top 10 (this set has no floor cut); with room
    for one memory, a question of two gold items can show only one."""
    item, shown = full["levels"]["item"], full["levels"]["shown"]
    assert shown["overall"]["n"] == item["overall"]["n"] == 4
    assert shown["overall"]["metrics"]["recall@10"] == item["overall"]["metrics"]["recall@10"]
    one = run(dataset, embedder, max_tokens=40)
    printed = {r["id"]: r["kept"] for r in one["questions"] if "kept" in r}
    assert max(printed.values()) == 1
    multi = one["levels"]["shown"]["categories"]["multi"]["metrics"]["recall@10"]
    assert multi <= 0.5 < one["levels"]["item"]["categories"]["multi"]["metrics"]["recall@10"]
