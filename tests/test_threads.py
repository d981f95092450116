"""The thread count of bulk decodes, chosen by measuring (memcli/models/threads.py), with the
real embedder: the choice follows the times, never changes the vectors, and MEM_THREADS fixes
it."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from memcli.models.embedder import Embedder
from memcli.models.load import resolve_embedder_path
from memcli.models.threads import PROBE_EVERY, PROBES, ThreadChooser

TEXTS = [
    f"Memory number {i}: we talked about the {w} on day {i}."
    for i, w in enumerate(["garden", "budget", "trip to Porto", "new bike", "dentist"] * 8)
]


def drive(chooser: ThreadChooser, seconds_per_token: dict[int, float], decodes: int) -> list[int]:
    """The counts chooser picks over `decodes` decodes of 100 tokens that take as given."""
    used = []
    for _ in range(decodes):
        n = chooser.next()
        used.append(n)
        chooser.record(n, seconds_per_token[n] * 100, 100)
    return used


@pytest.mark.parametrize(
    ("times", "best"),
    [
        ({1: 2.0, 2: 1.2}, 2),  # idle cores: two threads faster
        ({1: 2.0, 2: 3.5}, 1),  # a core busy elsewhere: two threads slower
        ({1: 2.0, 2: 1.9, 4: 2.5}, 2),
    ],
)
def test_the_fastest_count_is_used_between_rounds_of_probing(times, best) -> None:
    chooser = ThreadChooser(tuple(times))
    probing = len(times) * PROBES
    used = drive(chooser, times, probing + PROBE_EVERY)
    assert sorted(used[:probing]) == sorted(list(times) * PROBES)  # each count tried
    assert set(used[probing:]) == {best}
    assert chooser.best == best


def test_a_change_of_load_is_found_at_the_next_round() -> None:
    chooser = ThreadChooser((1, 2))
    drive(chooser, {1: 2.0, 2: 1.0}, 2 * PROBES + PROBE_EVERY)
    assert chooser.best == 2
    used = drive(chooser, {1: 2.0, 2: 4.0}, 2 * PROBES + 5)  # the machine got busy
    assert chooser.best == 1 and used[-5:] == [1] * 5


def test_one_count_is_never_changed() -> None:
    chooser = ThreadChooser((3,))
    assert not chooser.chooses
    assert set(drive(chooser, {3: 1.0}, 50)) == {3}
    assert chooser.measured == {}


def test_mem_threads_fixes_the_count(monkeypatch) -> None:
    monkeypatch.setenv("MEM_THREADS", "3")
    assert ThreadChooser.for_machine().counts == (3,)
    monkeypatch.setenv("MEM_THREADS", "")
    assert 1 in ThreadChooser.for_machine().counts


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return Embedder(resolve_embedder_path("minilm"))


def test_a_bulk_embed_times_each_count_and_keeps_its_vectors(minilm: Embedder) -> None:
    runner = minilm._runner
    # Small decodes, so the probing round and some chosen decodes happen within one call
    # (the same packing for both: a decode's vectors depend on what it packs).
    minilm.token_budget, budget = 24, minilm.token_budget
    try:
        runner.chooser = ThreadChooser((1,))
        one_thread = minilm.embed(TEXTS)
        runner.chooser = ThreadChooser((1, 2))
        switching = minilm.embed(TEXTS)
    finally:
        minilm.token_budget = budget
    assert set(runner.chooser.measured) == {1, 2}
    assert all(t > 0 for t in runner.chooser.measured.values())
    np.testing.assert_allclose(switching, one_thread, atol=1e-5)
    # A query is one decode on the fixed count, whatever bulk decodes chose.
    query = minilm.embed_query("the trip to Porto")
    runner.chooser = ThreadChooser((1,))
    np.testing.assert_allclose(query, minilm.embed_query("the trip to Porto"), atol=1e-5)


def test_mem_threads_reaches_a_new_process() -> None:
    code = (
        "from memcli.models.embedder import Embedder, N_THREADS;"
        "from memcli.models.load import resolve_embedder_path;"
        "e = Embedder(resolve_embedder_path('minilm'));"
        "print(N_THREADS, e._runner.chooser.counts)"
    )
    env = {**os.environ, "MEM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "(2,)"]
