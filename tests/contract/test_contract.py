"""The contract every backend keeps, through `Memory` only: retain and recall, documents,
dedupe, corrections and as-of, forget, export/import, concurrency and bad input."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable

import pytest

from memcli import MemError, Memory
from memcli.clock import utcnow

NOW = "2026-11-20"


def texts(memory: Memory, **selection) -> list[str]:
    sel = memory.selection(**selection) if selection else None
    return [f.text for f in memory.list(sel, limit=None)]


def test_what_is_retained_is_recalled_with_the_json_contract(memory: Memory) -> None:
    stored = memory.retain(
        "Maya decided to fly to Lisbon on May 9.", at="2026-03-21", context="Maya", tags=["trip"]
    )
    assert [s.text for s in stored.stored] == ["Maya decided to fly to Lisbon on May 9."]
    assert stored.to_json()["summary"]["facts"] == 1
    answer = memory.recall("When does Maya fly to Lisbon?", now=NOW)
    top = answer.to_json()["results"][0]
    assert top["text"] == "Maya decided to fly to Lisbon on May 9."
    assert top["context"] == "Maya" and top["tags"] == ["trip"]
    assert top["occurred_start"].startswith("2026-05-09")
    assert set(top) >= {"id", "mentioned_at", "score", "scores", "ranks", "entities"}


def test_a_memory_not_made_yet_answers_reads_with_nothing_and_creates_nothing(
    open_memory: Callable[..., Memory],
) -> None:
    memory = open_memory("never")
    assert memory.recall("anything at all").results == []
    assert memory.list() == []
    assert memory.banks() == []
    assert not memory.exists()
    with pytest.raises(MemError, match="no mem store"):
        memory.forget(memory.selection(ids=[1]))


def test_a_document_retained_again_is_replaced_whole(memory: Memory) -> None:
    first = [
        {"text": "The offsite is in Porto.", "document_id": "plan"},
        {"text": "We take the 8:05 train.", "document_id": "plan"},
    ]
    memory.retain(items=first)
    memory.retain(
        items=[
            {"text": "The offsite moved to Braga.", "document_id": "plan"},
            {"text": "We drive there on Friday.", "document_id": "plan"},
        ]
    )
    assert sorted(texts(memory)) == ["The offsite moved to Braga.", "We drive there on Friday."]
    assert sorted(texts(memory, document_id="plan")) == sorted(texts(memory))


def test_identical_content_in_one_document_is_stored_once(memory: Memory) -> None:
    memory.retain(
        items=[
            {"text": "Remember the milk.", "document_id": "list", "timestamp": "2026-01-02"},
            {"text": "Remember the milk.", "document_id": "list", "timestamp": "2026-01-02"},
        ]
    )
    assert texts(memory) == ["Remember the milk."]
    # The same words said another day are another memory.
    memory.retain("Remember the milk.", at="2026-02-03")
    assert texts(memory) == ["Remember the milk.", "Remember the milk."]


def test_a_correction_closes_the_old_fact_and_as_of_sees_it(memory: Memory) -> None:
    old = memory.retain("Ben works at Siemens in Munich.", at="2024-05-10").stored[0].id
    time.sleep(1.1)  # times are kept to the second: as_of falls between the two
    between = utcnow()
    time.sleep(1.1)
    done = memory.correct(old, "Ben works at Bosch in Stuttgart.")
    assert done.corrected == old and len(done.by) == 1
    assert texts(memory) == ["Ben works at Bosch in Stuttgart."]
    before = memory.recall("Where does Ben work?", now=NOW, as_of=between)
    assert [c.fact.text for c in before.results] == ["Ben works at Siemens in Munich."]
    after = memory.recall("Where does Ben work?", now=NOW)
    assert after.results[0].fact.text == "Ben works at Bosch in Stuttgart."
    (shown,) = memory.show([done.by[0]])
    assert [h["id"] for h in shown.history] == [old, done.by[0]]
    with pytest.raises(MemError, match="already corrected"):
        memory.correct(old, "Ben works at home.")


def test_forget_takes_exactly_what_was_asked_and_ids_are_never_given_again(
    memory: Memory,
) -> None:
    ids = [
        memory.retain(f"Note {n} about the garden.", tags=["garden"] if n % 2 else []).stored[0].id
        for n in range(4)
    ]
    plan = memory.forget(memory.selection(tags=["garden"]), dry_run=True)
    assert sorted(plan.fact_ids) == [ids[1], ids[3]]  # tagged ones only: never the untagged
    assert len(texts(memory)) == 4  # a dry run changes nothing
    gone = memory.forget(memory.selection(tags=["garden"]))
    assert sorted(gone.fact_ids) == [ids[1], ids[3]] and gone.counts["facts"] == 2
    memory.forget(memory.selection(ids=[ids[0]]))
    assert texts(memory) == ["Note 2 about the garden."]
    newest = memory.retain("A note after the forgetting.").stored[0].id
    assert newest > max(ids)  # a forgotten fact's id names nothing else, ever
    with pytest.raises(MemError) as refused:
        memory.forget(memory.selection())
    assert refused.value.usage  # no selector: nothing goes


def test_export_then_import_round_trips_byte_for_byte(open_memory: Callable[..., Memory]) -> None:
    source = open_memory("source")
    source.retain(items=[{"text": "Ana adopted a beagle named Biscuit.", "document_id": "s1"}])
    source.retain("Biscuit loves the beach at Cascais.", tags=["pets"], context="Ana")
    first = source.correct(2, "Biscuit loves the beach at Carcavelos.").by[0]
    source.forget(source.selection(ids=[first]))  # a gap, and a correction reopened
    exported = io.StringIO()
    source.export(exported)
    target = open_memory("target")
    report = target.import_(exported.getvalue().splitlines(), name="export")
    assert report.counts["facts"] == len(texts(source, include_invalid=True))
    again = io.StringIO()
    target.export(again)
    assert again.getvalue() == exported.getvalue()
    with pytest.raises(MemError, match="already exists"):
        target.import_(exported.getvalue().splitlines(), name="export")


def test_writers_at_once_lose_nothing_and_share_no_id(open_memory: Callable[..., Memory]) -> None:
    """Several Memories (connections) on one store, each writing from its own thread."""
    open_memory("shared").retain("The first note.")
    writers = [open_memory("shared") for _ in range(4)]
    stored: list[int] = []
    lock = threading.Lock()
    failures: list[BaseException] = []

    def write(memory: Memory, n: int) -> None:
        try:
            for i in range(5):
                ids = [s.id for s in memory.retain(f"Writer {n} says thing {i}.").stored]
                with lock:
                    stored.extend(ids)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(m, n)) for n, m in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    assert len(stored) == len(set(stored)) == 20
    assert len(texts(writers[0])) == 21


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda m: m.retain(""), "text"),
        (lambda m: m.retain("x", tags=[""]), "tags"),
        (lambda m: m.retain("x", type="opinion"), "type"),
        (lambda m: m.retain("x", at="not a date at all"), "at"),
        (lambda m: m.retain("x", document_id="two\nlines"), "document_id"),
        (lambda m: m.recall("anything", max_tokens=0), "max_tokens"),
        (lambda m: m.recall("anything", budget="huge"), "budget"),
        (lambda m: m.recall("anything", tags_match="some"), "tags_match"),
        (lambda m: m.recall("anything", limit=-1), "limit"),
        (lambda m: m.recall("   "), None),
        (lambda m: m.list(m.selection(tags=[""])), "tags"),
        (lambda m: m.list(limit=0), "limit"),
        (lambda m: m.selection(since="2026-02-01", until="2026-01-01"), None),
        (lambda m: m.correct(1, ""), None),
        (lambda m: m.show([]), "ids"),
        (lambda m: Memory(m.db, bank=" padded "), "bank"),
    ],
)
def test_bad_input_is_a_usage_error_naming_its_argument_and_writes_nothing(
    memory: Memory, call, field
) -> None:
    memory.retain("A fact that stays.")
    with pytest.raises(MemError) as raised:
        call(memory)
    assert raised.value.usage, raised.value
    assert raised.value.field == field, raised.value
    assert "\n" not in str(raised.value) and "--" not in str(raised.value)
    assert texts(memory) == ["A fact that stays."]


def test_an_import_of_a_damaged_file_writes_nothing(open_memory: Callable[..., Memory]) -> None:
    source = open_memory("source")
    source.retain("One fact to export.")
    exported = io.StringIO()
    source.export(exported)
    target = open_memory("target")
    target.retain("Already here.")
    lines = exported.getvalue().splitlines()
    with pytest.raises(MemError):
        target.import_(lines[:-1], name="cut")  # no end record: a half-written file
    with pytest.raises(MemError):
        target.import_(["not json"], name="garbage")
    assert [b.bank for b in target.banks()] == ["default"]
    assert texts(target) == ["Already here."]
