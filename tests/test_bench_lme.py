"""`mem bench --format lme`: LongMemEval S, one question a line, with the real embedder.

The fixture is built here in LongMemEval's own shape (question_id, question_type,
question_date, haystack_session_ids / haystack_dates / haystack_sessions with user and
assistant turns and has_answer, answer_session_ids), small enough to reason about: three
answerable questions of two types, each with its evidence session among unrelated ones, and
one abstention question. The checks are the protocol (what is indexed, with which ids and
documents; what is scored at which level; the raw floor beside) and invariants of the report,
plus one raw floor ranking computed by hand with the same model.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from memcli.bench.command import _guess_format, bench
from memcli.bench.datasets import iter_dataset, read_dataset
from memcli.bench.runner import LOSS_CLASSES, BenchOptions, run_bench
from memcli.store.vector_cache import DiskVectorCache

FILLER = {
    "s_garden": [
        "I planted three rows of tomatoes and some basil in the raised bed this weekend.",
        "Should I water them every morning or every other day in this heat?",
    ],
    "s_car": [
        "My car has been making a squeaking noise when I brake, mostly in the mornings.",
        "The mechanic said the brake pads are fine, so what else could it be?",
    ],
    "s_recipe": [
        "Can you give me a recipe for a vegetarian lasagna that feeds six people?",
        "I would like to use spinach and ricotta, and no mushrooms please.",
    ],
    "s_travel": [
        "I am planning a week in Kyoto in April and want to see the cherry blossoms.",
        "Which neighbourhood is best to stay in if I want to walk to the temples?",
    ],
}
EVIDENCE = {
    "ans_violin": [
        "I finally started violin lessons with a teacher called Ms. Okafor last month.",
        "She wants me to practise scales for forty minutes every evening.",
    ],
    "ans_move": [
        "We just moved from Denver to a flat in Leeds, the boxes are everywhere.",
        "The new place has a tiny balcony facing the canal.",
    ],
    "ans_dog": [
        "Our beagle Pepper turned five yesterday and we baked her a peanut butter cake.",
    ],
}


def session(turns: list[str], evidence: bool = False) -> list[dict]:
    """User turns each followed by an assistant reply (which the protocol does not index)."""
    out: list[dict] = []
    for i, text in enumerate(turns):
        turn = {"role": "user", "content": text}
        if evidence and i == 0:
            turn["has_answer"] = True
        out.append(turn)
        out.append({"role": "assistant", "content": f"Here are some thoughts about that ({i})."})
    return out


def record(qid: str, qtype: str, question: str, evidence: list[str]) -> dict:
    sids = [*FILLER, *evidence]
    sessions = [session(FILLER[s]) for s in FILLER] + [session(EVIDENCE[s], True) for s in evidence]
    dates = [f"2023/05/{day:02d} (Mon) 10:{day:02d}" for day in range(1, len(sids) + 1)]
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": question,
        "answer": "-",
        "question_date": "2023/06/30 (Fri) 09:00",
        "haystack_session_ids": sids,
        "haystack_dates": dates,
        "haystack_sessions": sessions,
        "answer_session_ids": evidence,
    }


RECORDS = [
    record(
        "q1", "single-session-user", "How long do I practise violin each evening?", ["ans_violin"]
    ),
    record("q2", "single-session-user", "Which city did we move to?", ["ans_move"]),
    record(
        "q3",
        "multi-session",
        "What instrument do I play and what is my dog called?",
        ["ans_violin", "ans_dog"],
    ),
    # An abstention question: its nearest session is named, but nothing answers it.
    {**record("q4_abs", "single-session-user", "What is my hamster called?", ["ans_dog"])},
]


@pytest.fixture(scope="module")
def lme_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lme") / "longmemeval-s-tiny.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def summary(lme_file: Path, embedder) -> dict:
    options = BenchOptions(dataset=str(lme_file), format="lme", ks=(1, 5, 10))
    return run_bench(
        iter_dataset(lme_file, "lme"), options, embedder=embedder, floor_embedder=embedder
    )


def test_reader_indexes_user_turns_by_session_as_documents(lme_file: Path):
    cases = read_dataset(lme_file, "lme")
    assert [c.id for c in cases] == ["q1", "q2", "q3", "q4_abs"]
    q1 = cases[0]
    # User turns only, ids SESSIONID_TURN with the turn index over every role.
    assert [i.id for i in q1.items[:2]] == ["s_garden_0", "s_garden_2"]
    assert all(i.document_id == i.session_id for i in q1.items)
    assert not any("thoughts" in i.text for i in q1.items)
    question = q1.questions[0]
    assert question.gold_sessions == {"ans_violin"} and question.gold_ids == {"ans_violin_0"}
    assert question.now.isoformat() == "2023-06-30T09:00:00"
    abstain = cases[3].questions[0]
    assert abstain.unanswerable and not abstain.gold_sessions and not abstain.gold_ids


def test_format_is_guessed_from_the_name():
    assert _guess_format(Path("longmemeval-s-dev.jsonl")) == "lme"
    assert _guess_format(Path("longmemeval-oracle.json")) == "longmemeval"
    assert _guess_format(Path("mine.jsonl")) == "jsonl"


def test_session_scores_per_type_and_abstentions_asked_not_scored(summary: dict):
    counts = summary["counts"]
    assert counts["scored:session"] == 3
    assert counts["asked:unanswerable"] == 1
    assert counts["scored:raw-floor"] == 3
    session = summary["levels"]["session"]
    assert session["overall"]["n"] == 3
    assert set(session["categories"]) == {"single-session-user", "multi-session"}
    metrics = session["overall"]["metrics"]
    for name in ("recall@5", "recall@10", "hitAny@1", "hitAny@5", "MRR", "nDCG@10"):
        assert 0.0 <= metrics[name] <= 1.0
    # Seven sessions in each haystack: whatever an arm found is within the top 10.
    assert metrics["recall@10"] == metrics["candidateRecall"]
    abstain = next(r for r in summary["questions"] if r["id"] == "q4_abs")
    assert abstain["unanswerable"] and "session_metrics" not in abstain
    assert "floor" in abstain and "top" in abstain


def test_session_loss_split_counts_every_gold_session(summary: dict):
    split = summary["session_losses"]
    assert set(split["overall"]) == set(LOSS_CLASSES)
    assert sum(split["overall"].values()) == 1 + 1 + 2
    # Seven sessions: nothing found is ranked out of the top 10, nor cut by 4096 tokens.
    assert split["overall"]["ranked_out"] == split["overall"]["budget_cut"] == 0
    found = summary["levels"]["session"]["overall"]["metrics"]["candidateRecall"]
    assert found > 0
    assert sum(sum(v.values()) for v in split["categories"].values()) == 4


def test_raw_floor_ranks_sessions_by_cosine_of_their_joined_turns(summary: dict, embedder):
    """The floor's MRR and R@1, computed by hand: one vector per session of its user turns
    joined by newlines, the query's vector, cosine."""
    texts = {**FILLER, **EVIDENCE}
    reciprocal, first = [], []
    for rec in RECORDS[:3]:
        sids = rec["haystack_session_ids"]
        vectors = embedder.embed(["\n".join(texts[s]) for s in sids])
        query = embedder.embed_query(rec["question"])
        order = [sids[i] for i in np.argsort(-(vectors @ query), kind="stable")]
        gold = rec["answer_session_ids"]
        reciprocal.append(1.0 / (min(order.index(g) for g in gold) + 1))
        first.append(sum(g in order[:1] for g in gold) / len(gold))
    floor = summary["levels"]["raw-floor"]["overall"]
    assert floor["n"] == 3
    assert floor["metrics"]["MRR"] == pytest.approx(sum(reciprocal) / 3, abs=1e-6)
    assert floor["metrics"]["recall@1"] == pytest.approx(sum(first) / 3, abs=1e-6)


def test_command_prints_the_session_and_floor_tables(lme_file: Path, tmp_path: Path):
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(bench)
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        app, ["--dataset", str(lme_file), "--out", str(out), "--no-vector-cache"]
    )
    assert result.exit_code == 0, result.output
    assert "level: session" in result.stdout and "level: raw-floor" in result.stdout
    assert "hit@5" in result.stdout and "where gold sessions are lost at k=10" in result.stdout
    report = json.loads(out.read_text())
    assert report["meta"]["format"] == "lme" and report["meta"]["options"]["raw_floor"]


def test_disk_vector_cache_serves_the_same_vectors_without_embedding(embedder, tmp_path):
    calls: list[tuple[str, list[str]]] = []

    class Counting:
        name, dim, fingerprint, rules = (
            embedder.name,
            embedder.dim,
            embedder.fingerprint,
            embedder.rules,
        )

        def embed(self, texts):
            calls.append(("passage", list(texts)))
            return embedder.embed(texts)

        def embed_queries(self, texts):
            calls.append(("query", list(texts)))
            return embedder.embed_queries(texts)

    first = DiskVectorCache(Counting(), tmp_path)
    vecs = first.embed(["a cat", "a dog", "a cat"])
    query = first.embed_query("a cat")  # a query is its own entry (e5 prefixes it)
    first.close()
    assert calls == [("passage", ["a cat", "a dog"]), ("query", ["a cat"])]
    again = DiskVectorCache(Counting(), tmp_path)  # a new run: read from disk
    assert np.array_equal(again.embed(["a dog", "a cat"]), vecs[[1, 0]])
    assert np.array_equal(again.embed_query("a cat"), query)
    assert len(calls) == 2 and (again.hits, again.misses) == (3, 0)
    assert again.name == embedder.name
    assert np.allclose(vecs[0], embedder.embed(["a cat"])[0], atol=1e-6)

    class Anonymous:
        dim = 3

    with pytest.raises(ValueError, match="fingerprint"):
        DiskVectorCache(Anonymous(), tmp_path)


def test_kept_stores_are_reused_with_the_same_scores(lme_file: Path, embedder, tmp_path: Path):
    """--stores: a second run retains nothing and scores the same; other data, a new store."""
    options = BenchOptions(dataset=str(lme_file), format="lme", ks=(1, 5), stores=str(tmp_path))

    def run() -> dict:
        cases = iter_dataset(lme_file, "lme")
        return run_bench(cases, options, embedder=embedder, floor_embedder=embedder)

    first, second = run(), run()
    assert "cases:reused" not in first["counts"] and second["counts"]["cases:reused"] == 4
    assert "retain" not in second["latency_ms"]
    assert first["levels"]["session"] == second["levels"]["session"]
    assert len(list(tmp_path.glob("*.db"))) == 4
    changed = [json.loads(line) for line in lme_file.read_text().splitlines()]
    changed[0]["haystack_sessions"][0][0]["content"] = "Something else entirely."
    other = tmp_path / "longmemeval-changed.jsonl"
    other.write_text("\n".join(json.dumps(r) for r in changed) + "\n")
    third = run_bench(
        iter_dataset(other, "lme"), options, embedder=embedder, floor_embedder=embedder
    )
    assert third["counts"]["cases:reused"] == 3
