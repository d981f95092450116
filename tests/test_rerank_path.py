"""Recall with a real GGUF cross-encoder: a small deterministic RANK model the tests build from
the MiniLM weights (its scores are meaningless but fixed, so they prove loading, batching,
score extraction and how the scores drive the final order)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from typer.testing import CliRunner

from memcli.cli import app
from memcli.models.convert import build_test_reranker
from memcli.models.reranker import load_reranker
from memcli.recall import RecallOptions, recall
from memcli.recall.rerank import document_text
from memcli.retain import RetainItem


@pytest.fixture(scope="session")
def rank_model(tmp_path_factory):
    return build_test_reranker(tmp_path_factory.mktemp("rank") / "test-rank.gguf")


def test_reranker_scores_order_the_results(store, remember, embedder, rank_model):
    remember(
        [RetainItem(f"Trip note {i}: the ferry to the island left at {i} pm.") for i in range(8)]
    )
    model = load_reranker(rank_model)
    opts = RecallOptions(now=datetime(2026, 11, 20), boosts=False)
    result = recall(
        store, "default", "ferry to the island", opts, embedder=embedder, reranker=model
    )
    assert result.reranker == model.name and not result.synthetic_scores
    scored = [c for c in result.ranked if c.reranker is not None]
    assert len(scored) == len(result.ranked) == 8  # under the mid cap of 50: all reranked
    # The scores are the model's own, pair by pair, and (boosts off) they are the final order.
    expected = model.score("ferry to the island", [document_text(c.fact) for c in scored])
    assert [c.reranker for c in scored] == pytest.approx(expected, abs=1e-5)
    finals = [c.final for c in result.ranked]
    assert finals == sorted(finals, reverse=True)


def test_rerank_cap_leaves_the_tail_in_rrf_order(store, remember, embedder, rank_model):
    remember([RetainItem(f"Harbour log {i}: boats counted {i * 3}.") for i in range(30)])
    model = load_reranker(rank_model)
    opts = RecallOptions(now=datetime(2026, 11, 20), budget="low", boosts=False)
    result = recall(store, "default", "harbour boats", opts, embedder=embedder, reranker=model)
    head = [c for c in result.ranked if c.reranker is not None]
    tail = [c for c in result.ranked if c.reranker is None]
    assert len(head) == 20 and len(tail) == len(result.ranked) - 20
    assert max(c.final for c in tail) < min(c.final for c in head)
    assert [c.rrf_rank for c in tail] == sorted(c.rrf_rank for c in tail)


def test_cli_reranker_option_and_env(db_path, rank_model, monkeypatch):
    runner = CliRunner()
    runner.invoke(app, ["--db", str(db_path), "retain", "The ferry leaves at noon."])
    r = runner.invoke(
        app,
        [
            "--db",
            str(db_path),
            "recall",
            "ferry",
            "--format",
            "json",
            "--reranker",
            str(rank_model),
        ],
    )
    assert r.exit_code == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["reranker"] == "test-rank" and obj["results"][0]["scores"]["reranker"] is not None
    monkeypatch.setenv("MEM_RERANKER", str(rank_model))
    r = runner.invoke(app, ["--db", str(db_path), "recall", "ferry", "--format", "json"])
    assert json.loads(r.stdout)["reranker"] == "test-rank"
    r = runner.invoke(
        app, ["--db", str(db_path), "recall", "ferry", "--format", "json", "--no-rerank"]
    )
    assert json.loads(r.stdout)["reranker"] is None


def test_the_embedder_is_not_a_reranker(db_path, embedder):
    from memcli.models.convert import default_embedder_path

    runner = CliRunner()
    runner.invoke(app, ["--db", str(db_path), "retain", "hello"])
    r = runner.invoke(
        app, ["--db", str(db_path), "recall", "hello", "--reranker", str(default_embedder_path())]
    )
    assert r.exit_code == 1
    assert "not a" in r.stderr and len(r.stderr.strip().splitlines()) == 1
