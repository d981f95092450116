"""Sentence vectors, on every backend through `Memory`: a memory that says several things
keeps a vector for each of its longer sentences beside its own, the semantic arm scores it by
the best of them, and they travel with it through export, import, reembed and forget."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable

import numpy as np
import pytest

from memcli import MemError, Memory

# Two sentences of >= 10 words that say different things, and short ones that get none.
TWO_THINGS = (
    "I spent the whole weekend repairing the old wooden fishing boat with my uncle in Porto. "
    "Next month my cousin and I are flying to Tokyo to see the cherry blossoms in the parks."
)
SHORT_SENTENCES = "Yes! I loved it. Thanks a lot."
ONE_THING = "My favourite tea is a smoky lapsang souchong from a small shop near the harbour."


def exported_facts(memory: Memory, bank: str | None = None) -> dict[str, dict]:
    """The bank's export (with vectors), its fact records by text."""
    out = io.StringIO()
    memory.export(out, bank=bank, with_vectors=True)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    return {r["text"]: r for r in records if r["kind"] == "fact"}


def exported_with(memory: Memory, edit: Callable[[dict], None]) -> list[str]:
    """The export's lines (with vectors), each fact record changed by edit."""
    out = io.StringIO()
    memory.export(out, with_vectors=True)
    lines = []
    for line in out.getvalue().splitlines():
        record = json.loads(line)
        if record["kind"] == "fact":
            edit(record)
        lines.append(json.dumps(record))
    return lines


def floats(value: str, dim: int = 384) -> np.ndarray:
    return np.frombuffer(base64.b64decode(value), dtype="<f4").reshape(-1, dim)


def test_only_a_fact_with_two_long_sentences_keeps_a_vector_for_each(memory: Memory) -> None:
    memory.retain(TWO_THINGS, context="Ana")
    memory.retain(SHORT_SENTENCES, context="Ana")
    memory.retain(ONE_THING, context="Ana")
    facts = exported_facts(memory)
    assert floats(facts[TWO_THINGS]["sentence_vectors"]).shape == (2, 384)
    assert "sentence_vectors" not in facts[SHORT_SENTENCES]
    assert "sentence_vectors" not in facts[ONE_THING]


def test_the_semantic_arm_scores_a_fact_by_its_nearest_sentence(memory: Memory) -> None:
    memory.retain(TWO_THINGS, context="Ana")
    memory.retain(ONE_THING, context="Ana")
    query = "a trip to Japan to see the cherry blossoms"
    answer = memory.recall(query, arms=["semantic"], min_score=0)
    ids = {f.text: f.id for f in memory.list()}
    found = {c.fact_id: c.arm_scores["semantic"] for c in answer.ranked}
    rec = exported_facts(memory)[TWO_THINGS]
    own, sentences = floats(rec["vector"])[0], floats(rec["sentence_vectors"])
    with memory.reading() as store:
        model = memory.embedder_for(store, "default")
    q = np.asarray(model.embed_query(query), dtype=np.float32)

    def cosine(v: np.ndarray) -> float:
        return float(v @ q / np.linalg.norm(v) / np.linalg.norm(q))

    best_sentence = max(cosine(v) for v in sentences)
    # The Tokyo sentence alone is nearer the question than the turn that also tells of a boat.
    assert best_sentence > cosine(own) + 0.01
    assert found[ids[TWO_THINGS]] == pytest.approx(best_sentence, abs=2e-3)
    assert answer.ranked[0].fact_id == ids[TWO_THINGS]


def test_sentence_vectors_round_trip_through_export_and_import(
    open_memory: Callable[..., Memory],
) -> None:
    source = open_memory("source")
    source.retain(TWO_THINGS, context="Ana")
    source.retain(ONE_THING, context="Ana")
    out = io.StringIO()
    source.export(out, with_vectors=True)
    target = open_memory("target")
    target.import_(out.getvalue().splitlines(), name="export")
    again = io.StringIO()
    target.export(again, with_vectors=True)
    assert again.getvalue() == out.getvalue()
    # Imported without vectors, they are computed as retain computes them.
    plain = io.StringIO()
    source.export(plain)
    computed = open_memory("computed")
    computed.import_(plain.getvalue().splitlines(), name="export", into="copy")
    sentences = floats(exported_facts(computed, "copy")[TWO_THINGS]["sentence_vectors"])
    original = floats(exported_facts(source)[TWO_THINGS]["sentence_vectors"])
    assert sentences.shape == original.shape
    assert np.allclose(sentences, original, atol=2e-3)


def test_a_file_of_an_older_mem_imports_and_reembed_gives_its_sentence_vectors(
    open_memory: Callable[..., Memory],
) -> None:
    source = open_memory("source")
    source.retain(TWO_THINGS, context="Ana")
    older = exported_with(source, lambda record: record.pop("sentence_vectors", None))
    target = open_memory("target")
    target.import_(older, name="export", into="old")
    assert "sentence_vectors" not in exported_facts(target, "old")[TWO_THINGS]
    target.reembed(bank="old")
    restored = floats(exported_facts(target, "old")[TWO_THINGS]["sentence_vectors"])
    original = floats(exported_facts(source)[TWO_THINGS]["sentence_vectors"])
    assert np.allclose(restored, original, atol=2e-3)


@pytest.mark.parametrize(
    "value, message",
    [
        ("not base64!", "not base64"),
        (base64.b64encode(np.ones(100, dtype="<f4").tobytes()).decode(), "not a multiple"),
        (base64.b64encode(np.zeros(384, dtype="<f4").tobytes()).decode(), "of zeros"),
        (base64.b64encode(np.full(384, np.nan, dtype="<f4").tobytes()).decode(), "NaN"),
        ("", "not a multiple"),
        (7, "bad 'sentence_vectors'"),
    ],
)
def test_damaged_sentence_vectors_in_a_file_import_nothing(
    open_memory: Callable[..., Memory], value, message
) -> None:
    source = open_memory("source")
    source.retain(TWO_THINGS, context="Ana")
    lines = exported_with(source, lambda record: record.update(sentence_vectors=value))
    target = open_memory("target")
    target.retain(ONE_THING)
    with pytest.raises(MemError, match=message) as raised:
        target.import_(lines, name="export", into="damaged")
    assert "\n" not in str(raised.value)
    assert [b.bank for b in target.banks()] == ["default"]


def test_forget_and_correct_take_the_sentence_vectors_with_the_fact(memory: Memory) -> None:
    memory.retain(TWO_THINGS, context="Ana")
    memory.retain(ONE_THING, context="Ana")
    (two,) = [f.id for f in memory.list() if f.text == TWO_THINGS]
    memory.forget(memory.selection(ids=[two]))
    answer = memory.recall("a trip to Japan to see the cherry blossoms", arms=["semantic"])
    assert all(c.fact_id != two for c in answer.ranked)
    facts = exported_facts(memory)
    assert list(facts) == [ONE_THING]


def test_the_relevance_floor_measures_a_fact_by_its_nearest_sentence_too(memory: Memory) -> None:
    # The whole turn's vector is below the floor for a question about its second sentence;
    # that sentence's is above: the floor and the semantic arm agree on the fact's cosine.
    memory.retain(TWO_THINGS, context="Ana")
    answer = memory.recall("trip to Japan")
    assert [c.fact_id for c in answer.results] == [1]
    assert answer.to_json()["floor"]["passed"] is True
