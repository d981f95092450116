"""The vector search (sign-bit prefilter read from vec0's chunks, exact cosine after), the
temporal neighbours read from the time index, and reused reader connections, on a real store
with the real embedder."""

from __future__ import annotations

from datetime import datetime, timedelta

import apsw
import numpy as np
import pytest

from memcli.retain import RetainItem
from memcli.store.vectors import prefilter_candidates, sign_bits

DAY = datetime(2026, 5, 1, 9)


def _exact(vectors: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    cos = vectors @ query / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query))
    return [int(ids[i]) for i in np.argsort(-cos)[:k]]


def test_sign_bits_are_vec0s_own(store):
    rng = np.random.default_rng(0)
    for _ in range(20):
        vec = rng.standard_normal(384).astype(np.float32)
        vec[rng.integers(0, 384, 30)] = 0.0
        ours = sign_bits(vec)
        theirs = store.conn.execute("SELECT vec_quantize_binary(?)", (vec.tobytes(),)).fetchone()
        assert ours == theirs[0]


def test_nearest_finds_the_exact_nearest_facts_beyond_the_prefilter(store, remember, embedder):
    topics = ["rain", "football", "bread", "taxes", "violin", "tomatoes", "trains", "cats"]
    texts = [f"Note {i}: something about {topics[i % 8]} and day {i}." for i in range(160)]
    remember([RetainItem(t, timestamp=DAY + timedelta(minutes=i)) for i, t in enumerate(texts)])
    bank = store.require_bank("default")
    ids, vectors = store.bank_vectors(bank)
    assert len(ids) == 160 > prefilter_candidates(5)  # the Hamming cut really drops facts
    assert store._bank_scan(bank) is not None  # the fast path, not vec0's fallback
    for query in ["violin lessons", "baking bread", "the cat sleeps", "weather and rain"]:
        qvec = embedder.embed([query])[0]
        found = store.nearest(bank, qvec, 5)
        assert [f for f, _ in found] == _exact(vectors, ids, qvec, 5)
        assert all(
            abs(c - float(np.dot(vectors[list(ids).index(f)], qvec))) < 1e-3 for f, c in found
        )
        # vec0's own KNN over the same bits gives the same answer
        assert [f for f, _ in store._vec0_nearest(bank, qvec, 5, None)] == [f for f, _ in found]


def test_temporal_neighbours_are_the_nearest_in_time_within_the_cutoff(store, remember):
    remember(
        [
            RetainItem("Breakfast.", timestamp=DAY),
            RetainItem("Coffee.", timestamp=DAY + timedelta(hours=1)),
            RetainItem("Lunch.", timestamp=DAY + timedelta(hours=4)),
            RetainItem("Next week.", timestamp=DAY + timedelta(days=9)),
        ]
    )
    ids = [r[0] for r in store.conn.execute("SELECT id FROM facts ORDER BY event_time")]
    near = store.time_neighbours(ids[0], 10, 24.0 * 7, 0.3)
    assert [(other, kind) for other, kind, _ in near] == [
        (ids[1], "temporal"),
        (ids[2], "temporal"),
    ]
    assert near[0][2] == pytest.approx(1 - 1 / 24)
    assert store.time_neighbours(ids[3], 10, 24.0 * 7, 0.3) == []
    assert len(store.time_neighbours(ids[1], 1, 24.0 * 7, 0.3)) == 1


def test_a_closed_reader_is_reused_and_closed_with_its_store(store, remember):
    remember("Something to read.", timestamp=DAY)
    reader = store.reader()
    conn = reader.conn
    reader.close()
    again = store.reader()
    assert again is reader and again.fact_count() == 1
    other = store.reader()  # while one is out, another is a new connection
    assert other is not again
    again.close()
    other.close()
    store.close()
    with pytest.raises(apsw.ConnectionClosedError):
        conn.execute("SELECT 1")


def test_a_fact_deleted_by_another_process_after_the_scan_reads_as_zeros(store, remember, db_path):
    from memcli.store import Store

    remember([RetainItem(f"Fact number {i}.", timestamp=DAY) for i in range(3)])
    bank = store.require_bank("default")
    scan = store._bank_scan(bank)
    rows = np.arange(len(scan))
    doomed = int(scan.ids[0])
    with Store(db_path) as other, other.atomic():
        other.delete_facts([doomed])
    vectors = scan.floats(rows)  # the scan read before the delete: no error, zeros
    assert not vectors[0].any() and all(v.any() for v in vectors[1:])
    # the next search reads the bank again and no longer has it
    assert doomed not in {f for f, _ in store.nearest(bank, vectors[1], 5)}
