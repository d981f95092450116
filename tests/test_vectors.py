"""The vector search (sign-bit prefilter read from vec0's chunks, exact cosine after), the
temporal neighbours read from the time index, and reused reader connections, on a real store
with the real embedder."""

from __future__ import annotations

from datetime import datetime, timedelta

import apsw
import numpy as np
import pytest

from memcli.retain import RetainItem
from memcli.store import FACT_TYPES, SCHEMA_VERSION
from memcli.store.vectors import hamming_reach, prefilter_candidates, shortlist_sizes, sign_bits

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
        theirs = store.core.conn.execute(
            "SELECT vec_quantize_binary(?)", (vec.tobytes(),)
        ).fetchone()
        assert ours == theirs[0]


def test_nearest_finds_the_exact_nearest_facts_beyond_the_prefilter(store, remember, embedder):
    topics = ["rain", "football", "bread", "taxes", "violin", "tomatoes", "trains", "cats"]
    texts = [f"Note {i}: something about {topics[i % 8]} and day {i}." for i in range(160)]
    remember([RetainItem(t, timestamp=DAY + timedelta(minutes=i)) for i, t in enumerate(texts)])
    bank = store.banks.require_bank("default")
    ids, vectors = store.vectors.bank_vectors(bank)
    assert len(ids) == 160 > prefilter_candidates(5)  # the Hamming cut really drops facts
    assert store.vectors._bank_scan(bank) is not None  # the fast path, not vec0's fallback
    for query in ["violin lessons", "baking bread", "the cat sleeps", "weather and rain"]:
        qvec = embedder.embed([query])[0]
        found = store.vectors.nearest(bank, qvec, 5)
        assert [f for f, _ in found] == _exact(vectors, ids, qvec, 5)
        assert all(
            abs(c - float(np.dot(vectors[list(ids).index(f)], qvec))) < 1e-3 for f, c in found
        )
        # vec0's own KNN over the same bits gives the same answer
        assert [f for f, _ in store.vectors._vec0_nearest(bank, qvec, 5, None)] == [
            f for f, _ in found
        ]


def test_temporal_neighbours_are_the_nearest_in_time_within_the_cutoff(store, remember):
    remember(
        [
            RetainItem("Breakfast.", timestamp=DAY),
            RetainItem("Coffee.", timestamp=DAY + timedelta(hours=1)),
            RetainItem("Lunch.", timestamp=DAY + timedelta(hours=4)),
            RetainItem("Next week.", timestamp=DAY + timedelta(days=9)),
        ]
    )
    ids = [r[0] for r in store.core.conn.execute("SELECT id FROM facts ORDER BY event_time")]
    near = store.links.time_neighbours(ids[0], 10, 24.0 * 7, 0.3)
    assert [(other, kind) for other, kind, _ in near] == [
        (ids[1], "temporal"),
        (ids[2], "temporal"),
    ]
    assert near[0][2] == pytest.approx(1 - 1 / 24)
    assert store.links.time_neighbours(ids[3], 10, 24.0 * 7, 0.3) == []
    assert len(store.links.time_neighbours(ids[1], 1, 24.0 * 7, 0.3)) == 1


def test_a_facts_causal_links_come_out_then_in_each_by_the_other_fact(store, bare_fact):
    """time_neighbours gives a fact's causal links with their weights, those going out by
    the fact they point to, then those coming in by the fact they come from (the order of
    the two indexes), and never its semantic links; then its neighbours in time."""
    rng = np.random.default_rng(1)
    with store.atomic():
        bank = store.banks.ensure_bank("default", DAY)
        store.vectors.ensure_vectors(bank, "unit", None, 8)
        ids = [
            bare_fact(store, bank, i, rng.standard_normal(8).astype(np.float32), DAY)
            for i in range(12)
        ]
        hub = ids[5]
        store.links.add_links(
            [
                (hub, ids[9], "causal", 1.0),
                (hub, ids[2], "causal", 1.0),
                (ids[11], hub, "causal", 1.0),
                (ids[0], hub, "causal", 1.0),
                (ids[3], hub, "semantic", 0.95),
                (hub, ids[4], "semantic", 0.91),
                (ids[7], ids[8], "causal", 1.0),
            ]
        )
    got = store.links.time_neighbours(hub, 20, 24.0 * 7, 0.3)
    # causal links weigh 1.0, as much as a fact said at the same time: they come first
    assert got[:4] == [(f, "causal", 1.0) for f in (ids[2], ids[9], ids[0], ids[11])]
    assert all(kind == "temporal" for _, kind, _ in got[4:])
    assert {kind for _, kind, _ in got} == {"causal", "temporal"}


def test_time_neighbours_of_many_facts_are_each_facts_own(store, bare_fact):
    """The temporal arm reads a round's facts' neighbours at once: the same lists, fact by
    fact, as reading each alone (facts said at one time, at the edges of the reach, causal
    links both ways, another bank's facts, a fact that does not exist), and a fact dated at
    either end of the calendar has neighbours too (its reach once overflowed datetime)."""
    rng = np.random.default_rng(2)
    hours = [0, 0, 0, 1, 5, 23.5, 24, 100, 167, 168, 169, 400, 0, 2]
    with store.atomic():
        bank = store.banks.ensure_bank("default", DAY)
        other = store.banks.ensure_bank("other", DAY)
        for b in (bank, other):
            store.vectors.ensure_vectors(b, "unit", None, 8)
        vec = lambda: rng.standard_normal(8).astype(np.float32)  # noqa: E731
        ids = [
            bare_fact(store, bank, i, vec(), DAY + timedelta(hours=h)) for i, h in enumerate(hours)
        ]
        away = bare_fact(store, other, 99, vec(), DAY)
        first = bare_fact(store, bank, 100, vec(), datetime(1, 1, 1))
        first_next = bare_fact(store, bank, 101, vec(), datetime(1, 1, 2))
        last = bare_fact(store, bank, 102, vec(), datetime(9999, 12, 31, 23))
        store.links.add_links([(ids[3], ids[7], "causal", 0.8), (ids[11], ids[3], "causal", 0.9)])
    asked = [*ids, away, first, last, 10**9]
    together = store.links.time_neighbours_of(asked, 4, 24.0 * 7, 0.3)
    assert set(together) == set(asked) - {10**9}
    for fact_id in asked:
        assert together.get(fact_id, []) == store.links.time_neighbours(fact_id, 4, 24.0 * 7, 0.3)
    assert together[first] == [(first_next, "temporal", 0.3)]
    assert together[last] == []
    assert together[away] == []
    # the causal links both ways, with their weights, among the neighbours in time
    wide = store.links.time_neighbours_of([ids[3]], 20, 24.0 * 7, 0.3)[ids[3]]
    assert [n for n in wide if n[1] == "causal"] == [
        (ids[11], "causal", 0.9),
        (ids[7], "causal", 0.8),
    ]
    assert wide[0][2] == pytest.approx(1 - 1 / 24)
    # three facts said at the same time: each one's others come first, nearest id first
    assert [f for f, _, _ in together[ids[1]][:3]] == [ids[0], ids[2], ids[12]]


def test_time_neighbours_are_those_a_walk_over_every_fact_finds(store, bare_fact):
    """time_neighbours_of against a plain reading of its rule over all the facts: causal
    links out (by the fact they point to) then in (by the fact they come from), with their
    weights; then the facts of the node's bank said at its time, and the `limit` nearest
    before and after it within the reach, weighing max(floor, 1 - hours / 24), nearest
    first (hours, then ids apart); the heaviest `limit` of all. Times are distinct but for
    one group said at once, so no cut falls inside a tie."""
    import random

    rng = random.Random(5)
    limit, reach, floor = 5, 24.0 * 7, 0.3
    rows: list[tuple[int, int, datetime]] = []  # (id, bank, time)
    with store.atomic():
        banks = [store.banks.ensure_bank(name, DAY) for name in ("default", "other")]
        for b in banks:
            store.vectors.ensure_vectors(b, "unit", None, 8)
        minutes = rng.sample(range(0, 60 * 24 * 20), 40)
        for i, minute in enumerate(minutes):
            bank = banks[i % 4 == 3]
            at = DAY + timedelta(minutes=minute if i not in (5, 6, 7) else minutes[5])
            vec = np.full(8, 0.1 * (i + 1), dtype=np.float32)
            rows.append((bare_fact(store, bank, i, vec, at), bank, at))
        ids = [r[0] for r in rows]
        causal = [(ids[2], ids[9], 0.7), (ids[9], ids[2], 0.4), (ids[11], ids[2], 0.9)]
        store.links.add_links([(a, b, "causal", w) for a, b, w in causal])

    def expected(node: int) -> list[tuple[int, str, float]]:
        _, bank, when = next(r for r in rows if r[0] == node)
        links = [(b, "causal", w) for a, b, w in sorted(causal, key=lambda c: c[1]) if a == node]
        links += [(a, "causal", w) for a, b, w in sorted(causal) if b == node]
        same = [r for r in rows if r[1] == bank and r[2] == when and r[0] != node]
        before = sorted(
            (r for r in rows if r[1] == bank and when - timedelta(hours=reach) <= r[2] < when),
            key=lambda r: r[2],
            reverse=True,
        )[:limit]
        after = sorted(
            (r for r in rows if r[1] == bank and when < r[2] <= when + timedelta(hours=reach)),
            key=lambda r: r[2],
        )[:limit]
        near = sorted(
            (abs((r[2] - when).total_seconds()) / 3600, abs(r[0] - node), r[0])
            for r in same + before + after
        )
        links += [
            (other, "temporal", max(floor, 1.0 - hours / 24.0)) for hours, _, other in near[:limit]
        ]
        return sorted(links, key=lambda n: -n[2])[:limit]

    got = store.links.time_neighbours_of(ids[::-1], limit, reach, floor)
    assert set(got) == set(ids)
    for node in ids:
        assert got[node] == expected(node), node
    assert any(kind == "causal" for found in got.values() for _, kind, _ in found)


def test_a_closed_reader_is_reused_and_closed_with_its_store(store, remember):
    remember("Something to read.", timestamp=DAY)
    reader = store.reader()
    conn = reader.core.conn
    reader.close()
    again = store.reader()
    assert again is reader and again.facts.fact_count() == 1
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
    bank = store.banks.require_bank("default")
    store.vectors.forget_scans()  # a scan whose floats are not read yet (retain's links read some)
    scan = store.vectors._bank_scan(bank)
    rows = np.arange(len(scan))
    doomed = int(scan.ids[0])
    with Store(db_path) as other, other.atomic():
        other.facts.delete_facts([doomed])
    vectors = scan.floats(rows, store.core.conn)  # the scan read before the delete: no error, zeros
    assert not vectors[0].any() and all(v.any() for v in vectors[1:])
    # the next search reads the bank again and no longer has it
    assert doomed not in {f for f, _ in store.vectors.nearest(bank, vectors[1], 5)}


def _same_scan(store, bank, after: str = "") -> None:
    """The cached scan (kept across this connection's writes) holds exactly what a fresh
    read of the bank does: the same rows, bits and fact types."""
    from memcli.store.vectors import BankScan

    kept = store.vectors._bank_scan(bank)
    fresh = BankScan(store.core.conn, bank, store.vectors.vector_dim())
    order_kept, order_fresh = np.argsort(kept.ids), np.argsort(fresh.ids)
    assert kept.ids[order_kept].tolist() == fresh.ids[order_fresh].tolist(), after
    assert (kept.words[:, order_kept] == fresh.words[:, order_fresh]).all()
    assert (kept.types[order_kept] == fresh.types[order_fresh]).all()
    for code, name in enumerate(FACT_TYPES):  # the kept rows of each type (reset by writes)
        assert set(kept.ids[kept.rows_of_types([name])]) == set(fresh.ids[fresh.types == code])
    both = [FACT_TYPES[0], FACT_TYPES[2]]
    assert set(kept.ids[kept.rows_of_types(both)]) == set(fresh.ids[np.isin(fresh.types, [0, 2])])


def test_a_kept_scan_follows_this_connections_writes(store, remember, db_path):
    from memcli.store import Store

    remember([RetainItem(f"First import, fact {i}.", timestamp=DAY) for i in range(5)])
    bank = store.banks.require_bank("default")
    scan = store.vectors._bank_scan(bank)
    steps = {
        "retain": lambda: remember(
            [RetainItem(f"More facts, number {i}.", timestamp=DAY) for i in range(70)]
        ),
        "read twice": lambda: store.vectors._bank_scan(bank),
        "retain again": lambda: remember([RetainItem("One more fact.", timestamp=DAY)]),
        "delete": lambda: store.facts.delete_facts(store.facts.fact_ids_of_bank(bank)[:3]),
        "retain a document": lambda: remember(
            [RetainItem(f"Doc line {i}.", document_id="d", timestamp=DAY) for i in range(4)]
        ),
        "replace the document": lambda: remember(
            [RetainItem("The doc, new version.", document_id="d", timestamp=DAY)]
        ),
    }
    for name, step in steps.items():
        with store.atomic():
            step()
        _same_scan(store, bank, name)
    assert store.vectors._bank_scan(bank) is not scan  # the delete dropped the first one

    # writes rolled back: the scan had been told of rows that do not exist
    store.vectors._bank_scan(bank)
    with pytest.raises(RuntimeError), store.atomic():
        remember([RetainItem("Rolled back.", timestamp=DAY)])
        store.vectors._bank_scan(bank)
        raise RuntimeError("undo")
    _same_scan(store, bank)

    # another connection's commit
    with Store(db_path) as other, other.atomic():
        other.facts.delete_facts(other.facts.fact_ids_of_bank(bank)[:2])
    _same_scan(store, bank)


def _clustered(rng: np.random.Generator, n: int, dim: int = 384) -> np.ndarray:
    """n unit vectors around n // 20 centres (neighbours at cosine 0.7-0.95), like sentences
    on shared topics, not the near-orthogonal vectors of pure noise."""
    centres = rng.standard_normal((max(1, n // 20), dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = rng.standard_normal((n, dim)).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    mix = rng.uniform(0.25, 0.6, (n, 1)).astype(np.float32)
    vectors = centres[np.arange(n) % len(centres)] + mix * noise
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_sign_dots_are_the_query_dotted_with_the_unpacked_bits(store, bare_fact):
    rng = np.random.default_rng(5)
    vectors = _clustered(rng, 300)
    with store.atomic():
        bank = store.banks.ensure_bank("default", DAY)
        store.vectors.ensure_vectors(bank, "clustered-test-vectors", None, 384)
        for i, vec in enumerate(vectors):
            bare_fact(store, bank, i, vec, DAY)
    scan = store.vectors._bank_scan(bank)
    rows = np.sort(rng.choice(len(scan), 120, replace=False))
    query = rng.standard_normal(384).astype(np.float32)
    order = np.argsort(scan.ids)  # rows -> the vectors they hold, by fact id
    ids_sorted = scan.ids[order]
    held = vectors[np.searchsorted(ids_sorted, scan.ids[rows])]
    bits = (held > 0).astype(np.float32)
    assert scan.sign_dots(rows, query) == pytest.approx(bits @ query, abs=1e-4)


def test_nearest_reads_the_floats_of_a_short_list_only_and_keeps_the_nearest(store, bare_fact):
    """At k = 300 (recall's budget mid) the semantic search read 1,200 float vectors: 6.5 ms
    of a 100k-fact recall. Four times as many rows by Hamming distance, narrowed by the
    query's floats against their sign bits, read 900 and find at least as many of the exact
    nearest (on clustered vectors, a bank several times the floats read)."""
    rng = np.random.default_rng(11)
    k = 300
    wide, keep = shortlist_sizes(k)
    assert (wide, keep) == (4 * prefilter_candidates(k), 3 * k)
    vectors = _clustered(rng, 7 * keep)
    with store.atomic():
        bank = store.banks.ensure_bank("default", DAY)
        store.vectors.ensure_vectors(bank, "clustered-test-vectors", None, 384)
        ids = [bare_fact(store, bank, i, vec, DAY) for i, vec in enumerate(vectors)]
    ids = np.array(ids)
    found_share, before_share = [], []
    for q in range(5):
        noise = rng.standard_normal(384).astype(np.float32)
        query = vectors[q * 97] + 0.5 * noise / np.linalg.norm(noise)
        store.vectors.forget_scans()  # a fresh scan: count this query's float reads alone
        found = store.vectors.nearest(bank, query, k)
        scan = store.vectors._bank_scan(bank)
        assert scan._kept_count == keep
        exact = _exact(vectors, ids, query, k)
        assert len(found) == k
        # the cosines are exact, best first
        cos = {int(i): float(c) for i, c in zip(ids, vectors @ query / np.linalg.norm(query))}
        assert [c for _, c in found] == pytest.approx([cos[f] for f, _ in found], abs=1e-3)
        assert [c for _, c in found] == sorted((c for _, c in found), reverse=True)
        found_share.append(len({f for f, _ in found} & set(exact)) / k)
        # what the 1,200 nearest by Hamming distance alone found (the search before)
        hamming = ((vectors > 0) != (query > 0)).sum(axis=1)
        before = np.argsort(hamming, kind="stable")[: prefilter_candidates(k)]
        best = before[np.argsort(-(vectors[before] @ query), kind="stable")[:k]]
        before_share.append(len(set(ids[best].tolist()) & set(exact)) / k)
        # the nearest ten: the same cosines (half-precision floats may swap near-ties)
        assert [c for _, c in found[:10]] == pytest.approx([cos[f] for f in exact[:10]], abs=1e-3)
    # at least as many of the exact 300 as the 1,200 by Hamming distance, with fewer reads
    # (here 0.86 against 0.77; on real sentences at 100k facts, 0.957 against 0.909)
    assert np.mean(found_share) >= np.mean(before_share)


def test_link_search_over_a_large_bank_finds_the_exact_nearest_earlier_facts(store, bare_fact):
    """nearest_earlier reads floats only for rows within hamming_reach of a new fact: on
    clustered vectors (neighbours at cosine 0.7-0.95, a bank several times the candidates)
    it still finds exactly the nearest earlier facts with cosine >= the floor."""
    rng = np.random.default_rng(3)
    k, floor = 10, 0.7
    n = 8 * prefilter_candidates(k) + 500
    centres = rng.standard_normal((n // 20, 384)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = rng.standard_normal((n, 384)).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    mix = rng.uniform(0.25, 0.6, (n, 1)).astype(np.float32)
    vectors = centres[np.arange(n) % len(centres)] + mix * noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with store.atomic():
        bank = store.banks.ensure_bank("default", DAY)
        store.vectors.ensure_vectors(bank, "clustered-test-vectors", None, 384)
        for i, vec in enumerate(vectors):
            bare_fact(store, bank, i, vec, DAY)
    ids = np.array(store.facts.fact_ids_of_bank(bank))
    stored = np.stack([store.vectors.vectors_for([int(i)])[int(i)] for i in ids])
    new = list(range(len(ids) - 64, len(ids)))
    excluded = {int(ids[5]), int(ids[25])}
    found = store.vectors.nearest_earlier(
        [bank], [int(ids[i]) for i in new], stored[new], k, excluded, floor
    )
    linked = sum(len(f) for f in found)
    assert linked > 64 * 5  # the clusters give real neighbours
    for i, got in zip(new, found):
        cos = stored[:i] @ stored[i]
        allowed = [j for j in np.argsort(-cos) if cos[j] >= floor and int(ids[j]) not in excluded]
        # the same neighbours (equal cosines, position by position; near-ties may swap)
        assert [c for _, c in got] == pytest.approx([float(cos[j]) for j in allowed[:k]], abs=2e-4)


@pytest.mark.parametrize(
    ("dim", "floor", "reach"),
    [(384, 0.7, 132), (384, 0.9, 83), (768, 0.7, 243), (384, -1.0, 384), (384, 1.0, 0)],
)
def test_hamming_reach(dim, floor, reach):
    assert hamming_reach(dim, floor) == reach


def test_pairs_at_the_floor_are_within_the_hamming_reach():
    """Random pairs at exactly the cosine floor, in random directions: their sign bits
    differ in at most hamming_reach bits (the margin is four spreads: none of 3,000)."""
    rng = np.random.default_rng(11)
    for floor in (0.6, 0.7, 0.8):
        reach = hamming_reach(384, floor)
        a = rng.standard_normal((3000, 384))
        a /= np.linalg.norm(a, axis=1, keepdims=True)
        r = rng.standard_normal((3000, 384))
        r -= (r * a).sum(axis=1, keepdims=True) * a  # orthogonal to a
        r /= np.linalg.norm(r, axis=1, keepdims=True)
        b = floor * a + np.sqrt(1 - floor**2) * r
        assert np.allclose((a * b).sum(axis=1), floor)
        distances = ((a > 0) != (b > 0)).sum(axis=1)
        assert distances.max() <= reach
        assert distances.mean() == pytest.approx(384 * np.arccos(floor) / np.pi, rel=0.02)


@pytest.fixture(scope="module")
def hourly_store(tmp_path_factory):
    """20,000 facts one hour apart with random vectors, one in fifty an observation: big
    enough that nearest_in_window probes, goes on probing or lists the window, as the share
    of the window among the rows nearest to the query decides."""
    from conftest import _insert_bare_fact

    from memcli.store import Store

    path = tmp_path_factory.mktemp("hourly") / "mem.db"
    rng = np.random.default_rng(11)
    with Store(path) as store, store.atomic():
        bank = store.banks.ensure_bank("default", DAY)
        store.vectors.ensure_vectors(bank, "unit", None, 64)
        for i in range(20_000):
            vec = rng.standard_normal(64).astype(np.float32)
            fact_type = "observation" if i % 50 == 0 else "world"
            _insert_bare_fact(store, bank, i, vec, DAY + timedelta(hours=i), fact_type=fact_type)
    store = Store(path, create=False)
    yield store, bank, rng.standard_normal((3, 64)).astype(np.float32)
    store.close()


@pytest.mark.parametrize(
    "case",
    [
        # (window as a share of the 20,000 hours, fact types, how the facts are found, and
        # whether a probe came first: a window holding too few of the bank's facts for the
        # probe to pay is listed at once)
        ("the whole store: the first probe finds enough", (0.0, 1.0), None, "probed", True),
        ("a fifth of it: probing goes on further", (0.4, 0.6), None, "probed further", True),
        ("a narrow window is listed", (0.5, 0.51), None, "listed", False),
        ("a filter that rejects most is listed", (0.0, 1.0), ("observation",), "listed", True),
        ("a narrow window and a filter", (0.5, 0.53), ("observation",), "listed", False),
        ("a filter that rejects a few", (0.2, 0.25), ("world",), "listed", False),
        ("an empty window", (1.5, 2.0), None, "listed", False),
    ],
    ids=lambda c: c[0],
)
def test_nearest_in_a_window_is_the_same_probed_or_listed(hourly_store, case, monkeypatch):
    """nearest_in_window probes the bank's rows in Hamming order instead of listing a wide
    window's facts; either way the k facts must be those of nearest_among over the listed
    window, ties included, and each in the window and the filter."""
    from memcli.recall.filters import FactFilter

    store, bank, queries = hourly_store
    _, (lo, hi), types, how, probes = case
    start, end = DAY + timedelta(hours=20_000 * lo), DAY + timedelta(hours=20_000 * hi)
    flt = FactFilter(types, None, "any")
    checked = []
    check = store.search.in_window_among
    monkeypatch.setattr(
        store.search, "in_window_among", lambda ids, *a: checked.append(1) or check(ids, *a)
    )
    for query in queries:
        checked.clear()
        got, figures = store.vectors.nearest_in_window(bank, query, start, end, flt, 5)
        assert bool(checked) == probes
        listed, _ = store.vectors.nearest_in_window(bank, query, start, end, flt, 5, probe=False)
        assert got == listed
        inside = store.search.fact_ids_in_window(bank, start, end, flt)
        # listed unfiltered and checked on the picks: the same as filtering first
        assert listed == store.vectors.nearest_among(bank, query, inside, 5)
        assert len(got) == min(5, len(inside))
        assert {f for f, _ in got} <= set(inside.tolist())
        first = 4 * prefilter_candidates(5)
        found = {
            "probed": figures.get("probed") == first,
            "probed further": figures.get("probed", 0) > first,
            "listed": "listed" in figures,
        }
        assert found[how], figures


def test_one_scan_searched_from_two_connections_in_two_threads(store, bare_fact, db_path):
    """A recall's temporal arm searches with the main connection's scan from a second thread
    and connection (search_with) while the semantic arm searches on the first: the floats
    both read are kept once, each read gets its own rows' vectors, and the second connection
    gives the scan back when done."""
    import threading

    from memcli.store import Store

    rng = np.random.default_rng(5)
    vectors = _clustered(rng, 3000)
    with store.atomic():
        bank = store.banks.ensure_bank("default", DAY)
        store.vectors.ensure_vectors(bank, "clustered-test-vectors", None, 384)
        ids = np.array([bare_fact(store, bank, i, v, DAY) for i, v in enumerate(vectors)])
    scan = store.vectors.prepare_vector_search(bank)
    other = Store(db_path, create=False)
    other.vectors.search_with(bank, scan)
    assert other.vectors._bank_scan(bank) is scan
    queries = [vectors[i] + 0.1 * rng.standard_normal(384).astype(np.float32) for i in range(40)]
    results: dict[tuple[int, int], list] = {}

    def search(who: int, on: Store) -> None:
        for q, query in enumerate(queries[who::2]):
            results[who, q] = on.vectors.nearest(bank, query, 50)

    threads = [threading.Thread(target=search, args=(w, s)) for w, s in ((0, store), (1, other))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (who, q), found in results.items():
        exact = _exact(vectors, ids, queries[who::2][q], 50)
        assert [f for f, _ in found[:10]] == exact[:10]
    # every row kept once, with its own vector
    kept = scan._slot >= 0
    assert scan._kept_count == int(kept.sum())
    rows = np.flatnonzero(kept)
    assert np.allclose(scan.floats(rows, store.core.conn), vectors[rows], atol=2e-3)
    other.vectors.search_with(bank, None)
    assert other.vectors._bank_scan(bank) is not scan
    other.close()


@pytest.mark.parametrize(
    ("fact_types", "expected_types"),
    [
        (None, set(FACT_TYPES)),
        (list(FACT_TYPES), set(FACT_TYPES)),
        (["experience"], {"experience"}),
        (["world", "observation"], {"world", "observation"}),
    ],
)
def test_nearest_searches_the_wanted_fact_types_together(
    store, bare_fact, fact_types, expected_types
):
    """One search over the wanted types gives the k nearest of them all (the semantic arm
    keeps its best k overall), with exact cosines; facts of other types never come back."""
    rng = np.random.default_rng(2)
    vectors = _clustered(rng, 1800)
    types = [FACT_TYPES[i % 3] for i in range(len(vectors))]
    with store.atomic():
        bank = store.banks.ensure_bank("default", DAY)
        store.vectors.ensure_vectors(bank, "clustered-test-vectors", None, 384)
        ids = np.array(
            [
                bare_fact(store, bank, i, v, DAY, fact_type=t)
                for i, (v, t) in enumerate(zip(vectors, types))
            ]
        )
    wanted = np.isin(types, sorted(expected_types))
    for q in range(3):
        query = vectors[q * 101] + 0.3 * rng.standard_normal(384).astype(np.float32)
        found = store.vectors.nearest(bank, query, 100, fact_types)
        assert len(found) == 100
        by_id = dict(zip(ids.tolist(), types))
        assert {by_id[f] for f, _ in found} <= expected_types
        exact = _exact(vectors[wanted], ids[wanted], query, 100)
        assert [f for f, _ in found[:10]] == exact[:10]
        # most of the exact 100 (on these synthetic clusters 0.84-0.9; real sentences ~0.96)
        assert len({f for f, _ in found} & set(exact)) >= 75


def test_a_listed_window_keeps_only_valid_facts_as_filtering_first_did(db_path):
    """A window listed without the filter and checked on the sign bits' picks, as far down
    as needed, gives the k that listing only the filter's facts gave: here with two in five
    facts closed by a correction, nearest to the query among them."""
    from conftest import _insert_bare_fact

    from memcli.recall.filters import FactFilter
    from memcli.store import Store

    rng = np.random.default_rng(8)
    with Store(db_path) as store:
        with store.atomic():
            bank = store.banks.ensure_bank("default", DAY)
            store.vectors.ensure_vectors(bank, "unit", None, 64)
            ids = [
                _insert_bare_fact(
                    store, bank, i, rng.standard_normal(64).astype(np.float32),
                    DAY + timedelta(hours=i),
                )
                for i in range(3000)
            ]  # fmt: skip
            closed = ids[::5] + ids[1::5]
            store.core.conn.execute(
                "UPDATE facts SET invalid_at = ? WHERE id IN (SELECT value FROM json_each(?))",
                ("2026-01-01T00:00:00", str(closed)),
            )
        flt = FactFilter()
        start, end = DAY + timedelta(hours=100), DAY + timedelta(hours=400)
        for query in rng.standard_normal((4, 64)).astype(np.float32):
            for k in (5, 60):
                got, how = store.vectors.nearest_in_window(
                    bank, query, start, end, flt, k, probe=False
                )
                inside = store.search.fact_ids_in_window(bank, start, end, flt)
                assert "listed" in how
                assert got == store.vectors.nearest_among(bank, query, inside, k)
                assert len(got) == k and not {f for f, _ in got} & set(closed)


@pytest.mark.parametrize("types", [("observation",), ("experience",)])
def test_a_strict_filter_on_a_listed_window_checks_a_bounded_number_of_facts(
    hourly_store, monkeypatch, types
):
    """Listed unfiltered, a window is checked against the filter on the sign bits' first
    picks only; when too few of those pass (a type the window hardly or never holds) the
    window is listed with the filter instead. Checking ever more picks, each round all of
    them again, took 11.8 s for a year of a 100k-fact bank with no observation in it."""
    from memcli.recall.filters import FactFilter

    store, bank, queries = hourly_store
    checked: list[int] = []
    check = store.search.filter_facts
    monkeypatch.setattr(
        store.search, "filter_facts", lambda ids, *a: checked.append(len(ids)) or check(ids, *a)
    )
    flt = FactFilter(types)
    start, end = DAY + timedelta(hours=2_000), DAY + timedelta(hours=2_400)
    for query in queries:
        checked.clear()
        got, how = store.vectors.nearest_in_window(bank, query, start, end, flt, 5, probe=False)
        assert sum(checked) <= 2 * prefilter_candidates(5)
        inside = store.search.fact_ids_in_window(bank, start, end, flt)
        assert got == store.vectors.nearest_among(bank, query, inside, 5)
        assert len(got) == min(5, len(inside))


# -- sentence vectors (store schema 10) ---------------------------------------------------

TWO_SENTENCES = [
    "We walked along the river for hours on {d} and talked about {a} the whole way home. "
    "Later my sister called to say that her new job at the {b} company starts next week.",
    "The {a} workshop on {d} was far better than I expected and lasted until late evening. "
    "Afterwards we argued about whether the {b} museum deserves a second visit this year.",
]
TOPICS = ["sailing", "pottery", "chess", "jazz", "hiking", "cooking", "physics", "poetry"]


def test_nearest_sentences_is_the_exact_best_sentence_of_each_fact(store, remember, embedder):
    texts = [
        TWO_SENTENCES[i % 2].format(a=TOPICS[i % 8], b=TOPICS[(i * 3 + 1) % 8], d=f"day {i}")
        for i in range(40)
    ]
    remember([RetainItem(t, timestamp=DAY + timedelta(minutes=i)) for i, t in enumerate(texts)])
    bank = store.banks.bank_id("default")
    ids = store.facts.fact_ids_of_bank(bank)
    sentences = store.vectors.sentence_vectors(ids)
    assert sorted(sentences) == sorted(ids) and all(len(v) == 2 for v in sentences.values())
    types = dict(
        store.core.conn.execute("SELECT id, fact_type FROM facts WHERE bank_id = ?", (bank,))
    )
    query = np.asarray(embedder.embed(["a new job that starts soon"])[0], dtype=np.float32)

    def best(vectors: np.ndarray) -> float:
        return float(
            (vectors @ query / np.linalg.norm(vectors, axis=1) / np.linalg.norm(query)).max()
        )

    exact = sorted(((f, best(v)) for f, v in sentences.items()), key=lambda p: -p[1])
    by_fact = dict(exact)

    def same(found: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
        # Each fact with its own best cosine, and the cosines rank for rank (sentences of the
        # same words tie: either may come first).
        assert len({f for f, _ in found}) == len(found) == len(want)
        assert np.allclose([c for _, c in found], [by_fact[f] for f, _ in found], atol=1e-5)
        assert np.allclose([c for _, c in found], [c for _, c in want], atol=1e-5)

    same(store.vectors.nearest_sentences(bank, query, 7), exact[:7])
    kind = types[exact[0][0]]
    of_kind = [p for p in exact if types[p[0]] == kind]
    found = store.vectors.nearest_sentences(bank, query, 3, [kind])
    same(found, of_kind[:3])
    assert all(types[f] == kind for f, _ in found)
    # Forgotten, a fact leaves none behind, and the next search (same connection) skips it.
    top = exact[0][0]
    with store.atomic():
        store.facts.delete_facts([top])
    assert store.health.fact_traces(top)["sentence_vec"] == 0
    assert top not in [f for f, _ in store.vectors.nearest_sentences(bank, query, 40)]


def test_a_store_of_schema_9_is_read_as_it_is_and_reembed_gives_it_sentence_vectors(tmp_path):
    from memcli import Memory
    from memcli.store.location import open_store

    text = TWO_SENTENCES[0].format(a="sailing", b="pottery", d="Monday")
    path = tmp_path / "old.db"
    with Memory(path) as memory:
        memory.retain(text)
    conn = apsw.Connection(str(path))
    conn.execute("DROP TABLE sentence_vec; PRAGMA user_version = 9")
    conn.close()
    old = open_store(path, create=False, readonly=True)  # read as it is, never upgraded
    try:
        query = np.ones(384, dtype=np.float32)
        assert old.vectors.nearest_sentences(1, query, 5) == []
        assert old.vectors.sentence_vectors([1]) == {}
        assert old.vectors.nearest(1, query, 5)[0][0] == 1
        assert old.health.row_counts()["sentence_vec"] == 0
    finally:
        old.close()
    with Memory(path) as memory:
        memory.reembed()  # a write: upgrades the file, then gives the old fact its sentences
        answer = memory.recall("a new job at the pottery company", arms=["semantic"])
        assert [c.fact_id for c in answer.ranked] == [1]
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("SELECT count(*) FROM sentence_vec WHERE fact_id = 1").fetchone()[0] == 2
    conn.close()


def _bank_of_sentences(store, sentences: list[np.ndarray], types: list[str]) -> int:
    """A bank whose fact i has the sentence vectors sentences[i] (its own vector their mean),
    made without an embedder: the search's cost and exactness do not depend on the text."""
    from conftest import _insert_bare_fact

    with store.atomic():
        bank = store.banks.ensure_bank("default", DAY)
        store.vectors.ensure_vectors(bank, "test-vectors", None, 384)
        for i, (rows, fact_type) in enumerate(zip(sentences, types)):
            at = DAY + timedelta(minutes=i)
            fact_id = _insert_bare_fact(
                store, bank, i, rows.mean(axis=0), at, now=DAY, fact_type=fact_type
            )
            store.vectors.add_sentence_vectors(fact_id, bank, fact_type, rows)
    return bank


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = rng.standard_normal((n, 384)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_sentence_scan_finds_the_best_sentences_reading_only_its_short_list(store, monkeypatch):
    """Schema 11: a big bank's sentences are ranked by their sign bits and only a short
    list's floats are read. Each query has three planted facts, one sentence of each near
    it, among 6,000 random sentences: they come first, with their exact cosines, best first,
    having read the floats of no more rows than the short list holds."""
    rng = np.random.default_rng(3)
    queries = _unit(rng, 4)
    sentences = [_unit(rng, 3) for _ in range(2_000)]
    types = ["experience" if i % 4 == 0 else "world" for i in range(2_000)]
    planted: dict[int, list[int]] = {}
    for q, query in enumerate(queries):
        picks = [int(i) for i in rng.choice(np.arange(q, 2_000, 4), 3, replace=False)]
        for rank, i in enumerate(picks):  # cosines ~0.95, ~0.9, ~0.85 to the query
            noise = _unit(rng, 1)[0]
            mix = (0.95 - 0.05 * rank) * query + np.sqrt(1 - (0.95 - 0.05 * rank) ** 2) * noise
            sentences[i][rank % 3] = mix
        planted[q] = picks
    bank = _bank_of_sentences(store, sentences, types)
    ids = store.facts.fact_ids_of_bank(bank)
    scan = store.vectors._sentence_matrix(bank)
    assert type(scan).__name__ == "SentenceScan" and len(scan) == 6_000
    for q, query in enumerate(queries):
        found = store.vectors.nearest_sentences(bank, query, 5)
        exact = {
            ids[i]: float((rows @ query / np.linalg.norm(rows, axis=1)).max())
            for i, rows in enumerate(sentences)
        }
        assert [f for f, _ in found[:3]] == [ids[i] for i in planted[q]]
        assert np.allclose([c for _, c in found], [exact[f] for f, _ in found], atol=2e-3)
        assert len({f for f, _ in found}) == 5
        # Only this query's fact type (the planted facts of query 0 are experiences).
        kind = types[planted[q][0]]
        typed = store.vectors.nearest_sentences(bank, query, 5, [kind])
        assert [f for f, _ in typed[:3]] == [ids[i] for i in planted[q]]
        assert all(types[ids.index(f)] == kind for f, _ in typed)
    # Eight searches, each reading the floats of at most its short list's rows.
    assert scan._kept_count <= 8 * shortlist_sizes(3 * 5)[1] < 6_000


def test_a_store_of_schema_10_is_searched_exactly_as_it_is_and_gains_sign_bits_when_opened(
    tmp_path,
):
    from memcli.store import Store
    from memcli.store.location import open_store

    rng = np.random.default_rng(5)
    path = tmp_path / "ten.db"
    sentences = [_unit(rng, 2) for _ in range(300)]
    query = _unit(rng, 1)[0]
    with Store(path) as store:  # 600 sentences: for 100 facts the short list holds them all
        bank = _bank_of_sentences(store, sentences, ["world"] * 300)
        now = store.vectors.nearest_sentences(bank, query, 100)
        bits = store.core.conn.execute("SELECT bits FROM sentence_vec ORDER BY rowid").fetchall()
    conn = apsw.Connection(str(path))
    conn.execute(
        "DROP INDEX sentence_vec_scan; ALTER TABLE sentence_vec DROP COLUMN bits; "
        "CREATE INDEX sentence_vec_bank ON sentence_vec(bank_id); PRAGMA user_version = 10"
    )
    conn.close()
    old = open_store(path, create=False, readonly=True)  # read as it is, never upgraded
    try:
        assert not old.vectors.has_sentence_bits()
        assert type(old.vectors._sentence_matrix(bank)).__name__ == "SentenceMatrix"
        exact = old.vectors.nearest_sentences(bank, query, 100)
        assert [f for f, _ in exact] == [f for f, _ in now]
        assert np.allclose([c for _, c in exact], [c for _, c in now], atol=1e-5)
    finally:
        old.close()
    with Store(path) as store:  # opened for writing: migrated, every row given its bits
        assert store.schema_version() == SCHEMA_VERSION
        assert store.vectors.has_sentence_bits()
        assert (
            store.core.conn.execute("SELECT bits FROM sentence_vec ORDER BY rowid").fetchall()
            == bits
        )
        assert store.vectors.nearest_sentences(bank, query, 100) == now


def test_getting_ready_to_search_reads_the_sentence_search_once_when_asked(store):
    """A recall reads the bank's sentence search while its model loads (with the semantic
    arm asked for); the search then uses what was read, not a second read."""
    rng = np.random.default_rng(9)
    bank = _bank_of_sentences(store, [_unit(rng, 2) for _ in range(50)], ["world"] * 50)
    store.vectors.forget_scans()
    store.vectors.prepare_vector_search(bank)
    assert bank not in store.vectors._sentences  # not asked: the arms may not need it
    store.vectors.prepare_vector_search(bank, sentences=True)
    held = store.vectors._sentences[bank][1]
    assert len(store.vectors.nearest_sentences(bank, _unit(rng, 1)[0], 5)) == 5
    assert store.vectors._sentences[bank][1] is held


def test_facts_of_many_sentences_do_not_leave_the_sentence_search_short(store):
    """Eight facts of 40 sentences each, all near the query, fill the short list (3 rows a
    fact wanted) with their own rows: the search widens until it has the k facts asked for,
    the eight first."""
    rng = np.random.default_rng(11)
    query = _unit(rng, 1)[0]
    near = []
    for _ in range(8):
        noise = _unit(rng, 40)
        near.append(0.9 * query + np.sqrt(1 - 0.81) * noise)
    sentences = near + [_unit(rng, 2 + i % 2) for i in range(500)]
    bank = _bank_of_sentences(store, sentences, ["world"] * len(sentences))
    ids = store.facts.fact_ids_of_bank(bank)
    assert type(store.vectors._sentence_matrix(bank)).__name__ == "SentenceScan"
    found = store.vectors.nearest_sentences(bank, query, 20)
    assert len(found) == len({f for f, _ in found}) == 20
    assert {f for f, _ in found[:8]} == set(ids[:8])
    exact = {
        ids[i]: float((rows @ query / np.linalg.norm(rows, axis=1)).max())
        for i, rows in enumerate(sentences)
    }
    assert np.allclose([c for _, c in found], [exact[f] for f, _ in found], atol=2e-3)
