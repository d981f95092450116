"""The token budget keeps the best memories that fit, skipping one too big and filling on."""

from __future__ import annotations

from memcli.recall.budget import fit, fit_texts
from memcli.recall.types import Candidate


def cands(sizes: list[int]) -> list[Candidate]:
    out = []
    for i, size in enumerate(sizes, start=1):
        c = Candidate(i, {}, {}, final=1.0 / i)
        c.tokens = size
        out.append(c)
    return out


def test_skips_a_fact_that_does_not_fit_and_keeps_filling():
    kept, used = fit(cands([40, 70, 30, 20]), 100, lambda c: c.tokens)
    # 40 fits (40), 70 would make 110: skipped, 30 fits (70), 20 fits (90)
    assert [c.fact_id for c in kept] == [1, 3, 4]
    assert used == 90


def test_limit_and_relevance_floor():
    kept, _ = fit(cands([1, 1, 1, 1]), 100, lambda c: c.tokens, limit=2)
    assert [c.fact_id for c in kept] == [1, 2]
    kept, _ = fit(cands([1, 1, 1, 1]), 100, lambda c: c.tokens, min_score=0.4)
    assert [c.fact_id for c in kept] == [1, 2]  # finals 1.0, 0.5 pass; 0.33 stops


def test_chunks_truncate_the_last_one():
    texts = ["a b c", "d e f g h"]
    out = fit_texts(texts, 5, lambda t: len(t.split()), lambda t, n: " ".join(t.split()[:n]))
    assert out == ["a b c", "d e"]


def test_filling_stops_when_no_candidate_can_fit_the_room_left():
    counted: list[int] = []

    def count(c: Candidate) -> int:
        counted.append(c.fact_id)
        return c.tokens

    kept, used = fit(cands([60, 35, 50, 9, 9, 9]), 100, count, floor=8)
    # 60 + 35 = 95: 5 tokens left, fewer than any memory takes: the rest are not counted.
    assert [c.fact_id for c in kept] == [1, 2]
    assert used == 95
    assert counted == [1, 2]
    # Without the floor the same candidates are all counted and none more kept.
    counted.clear()
    assert [c.fact_id for c in fit(cands([60, 35, 50, 9, 9, 9]), 100, count)[0]] == [1, 2]
    assert counted == [1, 2, 3, 4, 5, 6]


def test_a_candidate_that_cannot_fit_even_at_its_lower_bound_is_not_counted():
    counted: list[int] = []

    def count(c: Candidate) -> int:
        counted.append(c.fact_id)
        return c.tokens

    sizes = [40, 70, 30, 20, 12, 5, 25]
    plain = fit(cands(sizes), 100, count)
    counted.clear()
    bounded = fit(cands(sizes), 100, count, at_least=lambda c: c.tokens - 2)
    # The same memories kept; 70 (at least 68 with 40 used) and 25 (at least 23 with 95
    # used) are passed over without being counted.
    assert [c.fact_id for c in bounded[0]] == [c.fact_id for c in plain[0]] == [1, 3, 4, 6]
    assert bounded[1] == plain[1] == 95
    assert counted == [1, 3, 4, 5, 6]


def test_the_block_lower_bound_is_never_above_the_count():
    """What recall passes as at_least: the fewest tokens a bracketed date takes and the
    stored tail's count, for dates that print as a day, a month, a range or a plan."""
    from datetime import datetime

    from memcli.blocks import block_tail, block_tokens, block_tokens_at_least, memory_block
    from memcli.recall.budget import block_floor
    from memcli.store import Fact
    from memcli.tokens import count_tokens

    floor = block_floor()
    said = datetime(2026, 2, 10, 9)
    periods = [
        (None, None),
        (datetime(2026, 2, 10), datetime(2026, 2, 11)),
        (datetime(2026, 11, 1), datetime(2026, 12, 1)),
        (datetime(2025, 3, 4), datetime(2025, 3, 19)),
    ]
    for text in ["a", "好", "Hello there, how are you?", "x" * 40]:
        for context in [None, "Maya"]:
            for start, end in periods:
                fact = Fact(
                    1,
                    text,
                    context,
                    "world",
                    said,
                    start,
                    end,
                    [],
                    {},
                    1,
                    None,
                    None,
                    None,
                    [],
                    tail_tokens=count_tokens(block_tail(context, text)),
                )
                bound = block_tokens_at_least(fact, floor - 1)
                assert bound <= block_tokens(fact) == count_tokens(memory_block(fact))
                fact.tail_tokens = None  # a store not yet upgraded
                assert block_tokens_at_least(fact, floor - 1) <= block_tokens(fact)


def test_the_floor_is_a_true_lower_bound_of_a_memory_block():
    """Every printed memory starts "[YYYY-MM-DD" and has text: never fewer tokens."""
    from datetime import datetime

    from memcli.blocks import memory_block
    from memcli.recall.budget import block_floor
    from memcli.store import Fact
    from memcli.tokens import count_tokens

    floor = block_floor()
    for text in ["a", ".", "好", "😀", "x" * 50, "Hello there"]:
        for context in [None, "u"]:
            for when in [datetime(1999, 12, 31, 23), datetime(2026, 1, 1), datetime(2100, 6, 1)]:
                fact = Fact(
                    1, text, context, "world", when, None, None, [], {}, 1, None, None, None, []
                )
                assert count_tokens(memory_block(fact)) >= floor, (text, context, when)


def test_piped_text_output_fits_max_tokens_header_and_blank_lines_included(tmp_path):
    """`mem recall Q --max-tokens N | llm` gets at most N tokens (cl100k) in all: before, N
    bounded the memory blocks only and the header line and blank lines came on top."""
    from typer.testing import CliRunner

    from memcli.cli import app
    from memcli.tokens import count_tokens

    db = str(tmp_path / "m.db")
    runner = CliRunner()
    notes = [
        "Maya booked the Lisbon flights for the second week of April.",
        "Maya's sister Ana lives in Porto and works as a nurse.",
        "The Lisbon apartment has a balcony over the river.",
        "Maya decided to take the train from Lisbon to Porto instead of flying.",
        "Ana recommended a seafood place near the Lisbon cathedral.",
        "Maya will pay the Lisbon deposit by Friday.",
    ]
    rows = "".join(f'{{"text": "{t}", "context": "Maya"}}\n' for t in notes)
    r = runner.invoke(app, ["--db", db, "retain", "--at", "2026-03-01", "--jsonl", "-"], input=rows)
    assert r.exit_code == 0, r.stderr
    shown = []
    for budget in range(20, 420, 8):
        r = runner.invoke(
            app, ["--db", db, "recall", "What about Lisbon?", "--max-tokens", str(budget)]
        )
        # Too small for the header line and one memory: a usage error saying so.
        assert r.exit_code == (0 if r.stdout or "none fit" in r.stderr else 2), r.stderr
        assert count_tokens(r.stdout) <= budget, (budget, r.stdout)
        shown.append(r.stdout.count("\n[") if r.stdout else 0)
        if not r.stdout:
            assert "header" in r.stderr or "none fit" in r.stderr
    everything = runner.invoke(app, ["--db", db, "recall", "What about Lisbon?"]).stdout
    # A tight budget shows none, a roomy one all that match; more room never shows fewer.
    assert shown[0] == 0 and shown[-1] == everything.count("\n[") >= 3
    assert shown == sorted(shown), str(shown)


def test_a_big_top_memory_leaves_room_for_smaller_ones_at_any_budget():
    """Review finding: with a roomy budget the header was paid only by dropping from the
    end, so a top memory too big for the room left showed nothing ("give at least 841" for
    --max-tokens 900) though a small memory fitted; and at the switch to counting the
    header, more room showed fewer memories. Every budget from 40 to 1400 tokens here."""
    from datetime import datetime

    from memcli import render
    from memcli.blocks import block_tokens
    from memcli.recall.types import RecallResult
    from memcli.store import Fact
    from memcli.tokens import count_tokens

    def fact(i: int, text: str) -> Fact:
        return Fact(id=i, text=text, context=None, fact_type="world",
                    mentioned_at=datetime(2026, 3, 1), occurred_start=None, occurred_end=None,
                    tags=[], metadata={}, proof_count=1, source_id=None, document_id=None,
                    chunk_id=None, entities=[])  # fmt: skip

    long = " ".join(f"step{i} moves ledger {i} to the new cluster." for i in range(90))
    texts = [long, "The billing migration is short.", "Step0 and step1 go first.", long[:900]]
    ranked = []
    for i, text in enumerate(texts, start=1):
        c = Candidate(i, {}, {})
        c.fact, c.final = fact(i, text), 1.0 - i / 10
        ranked.append(c)
    shown = []
    budgets = range(40, 1400, 10)
    for budget in budgets:
        kept, used = fit(ranked, budget, lambda c: block_tokens(c.fact))
        result = RecallResult(
            query="what is the billing migration plan, step by step?", now=datetime(2026, 3, 2),
            budget="mid", max_tokens=budget, total_tokens=used, reranker=None,
            synthetic_scores=True, time_window=None, results=kept, ranked=ranked, arms={},
            timings={},
        )  # fmt: skip
        text = render.to_text(result)
        assert count_tokens(text) <= budget, budget
        shown.append(len(render.text_results(result)))
    # Below the big memory's own size (998 tokens) more room never shows fewer, across the
    # switch from counting the header to its byte bound (8 x ~100 bytes); from there on,
    # best first, the big one takes the room of the small ones, as fit() does.
    below = [n for b, n in zip(budgets, shown) if b < 998]
    assert below == sorted(below), below
    assert shown[0] == 0 and 0 not in shown[2:] and shown[-1] == 4, shown
