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
